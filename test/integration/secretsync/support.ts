// Harness of the Secret-sync integration tests: a PRIVATE real etcd (the vault's seal keys under
// /platform/secrets/_sys/ are global, so the shared etcd must not be initialized), both real
// engines, the real secrets service's Vault (initialized and unsealed here) with its own
// readSecrets, and a Manager with a single-process elector (marker writes fenced as in
// production). The store is private, so the controller runs with its default key layout.
// Containers are made with the cluster adapter, labelled as the PodGroup controller labels them;
// PodGroup specs are written to the store the way the API stores them. Assertions read the
// containers' real filesystems: an archive read (works on created containers) and `docker exec`
// through the engine socket (running ones).
import Docker from "dockerode";
import pino from "pino";
import { extract } from "tar-stream";
import { Readable } from "node:stream";
import { DockerCluster, type ContainerRef } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { fencedStore } from "../../../adapters/store/fenced.ts";
import { createSecretsService, readSecrets, secretKey, type Vault } from "../../../api/secrets/index.ts";
import { createSecretSyncController, defaultMarkerPrefix, type Marker, type SecretSyncController } from "../../../controllers/secretsync/index.ts";
import { LeaderElector } from "../../../runtime/leaderelection.ts";
import type { Logger } from "../../../runtime/log.ts";
import { Manager } from "../../../runtime/manager.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { loadServices, socketPath, uniqueName } from "../../helpers/services.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { appOf } from "../../../controllers/secretsync/specs.ts";
import { openGate, TokenVerifier } from "../../../api/auth/index.ts";

export const services = loadServices();

const podGroupPrefix = "/platform/orchestrator/podgroups/";

export class Harness {
  private etcd: EtcdProcess | undefined;
  private storeOrNull: EtcdStore | undefined;
  // Event streams reconnect at most 1 s apart, so an engine that comes back is seen back within a second.
  readonly cluster = DockerCluster.fromSpec(services.cluster, { events: { backoff: { maxMs: 1_000 } } });
  private vaultOrNull: Vault | undefined;
  private unsealKey = "";
  /** Every container this harness makes carries this label (cleanup finds them by it). */
  readonly testLabel = uniqueName("sst");
  /** putArchive calls the controller made, by container id (idempotence checks). */
  private readonly uploadCounts = new Map<string, number>();
  private manager: Manager | undefined;
  ss: SecretSyncController | undefined;
  /**
   * When set, a marker write (key, value) for which it returns true fails as a lost write would
   * (the controller's store throws; nothing is stored).
   */
  failMarkerPut: ((key: string, value: string) => boolean) | undefined;
  /** Every line the controller logged (checked for secret content). */
  readonly logLines: string[] = [];
  private readonly log: Logger = pino({ level: "trace" }, { write: (line: string) => void this.logLines.push(line) });

  get store(): EtcdStore {
    if (!this.storeOrNull) throw new Error("harness not started");
    return this.storeOrNull;
  }

  get vault(): Vault {
    if (!this.vaultOrNull) throw new Error("harness not started");
    return this.vaultOrNull;
  }

  async start(): Promise<void> {
    this.etcd = await startEtcd();
    this.storeOrNull = new EtcdStore({ endpoints: [this.etcd.endpoint] });
    // Secrets are written through the vault, as PUT does after authorizing; no request is served.
    const service = createSecretsService({ store: this.store, gate: openGate, apps: new TokenVerifier({ store: this.store }) });
    this.vaultOrNull = service.vault;
    const { keys } = await this.vault.init(1, 1);
    this.unsealKey = keys[0]!;
    await this.vault.unseal(this.unsealKey);

    await this.startController();
  }

  /** A fresh controller process on the same store: a new elector term, manager, cache and informers. */
  async startController(): Promise<void> {
    // Short timings: a controller "restart" here stops the previous manager cleanly (revoking its
    // lease), so the next term leads at once.
    const elector = new LeaderElector({
      store: this.store,
      key: "/platform/secrets/leader-test",
      identity: `harness-${Date.now()}`,
      ttlSeconds: 3,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
    });
    const manager = new Manager({ name: "secretsync-test", elector, gracefulShutdownMs: 10_000 });
    const cluster = this.cluster;
    // The real cluster, counting uploads.
    const counting = new Proxy(cluster, {
      get: (target, prop, receiver) => {
        if (prop === "putArchive") {
          return (...args: Parameters<DockerCluster["putArchive"]>) => {
            this.uploadCounts.set(args[0].id, this.uploads(args[0].id) + 1);
            return target.putArchive(...args);
          };
        }
        const v: unknown = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const fenced = fencedStore(this.store, () => elector.fence());
    // The fenced store, failing the marker writes failMarkerPut picks.
    const failing = new Proxy(fenced, {
      get: (target, prop, receiver) => {
        if (prop === "put") {
          return (...args: Parameters<typeof fenced.put>) => {
            if (this.failMarkerPut?.(args[0], args[1]) === true) return Promise.reject(new Error("marker write lost (test)"));
            return target.put(...args);
          };
        }
        const v: unknown = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    this.ss = createSecretSyncController({
      store: failing,
      cluster: counting,
      vault: this.vault,
      readSecrets,
      log: this.log,
      registry: manager.registry,
    });
    for (const i of this.ss.informers) manager.addInformer(i);
    for (const r of this.ss.runnables) manager.add(r);
    await manager.start();
    await this.ss.cache.waitForSync(undefined, 30_000);
    this.manager = manager;
  }

  async stopController(): Promise<void> {
    await this.manager?.stop();
    this.manager = undefined;
  }

  uploads(containerId: string): number {
    return this.uploadCounts.get(containerId) ?? 0;
  }

  async seal(): Promise<void> {
    await this.vault.seal();
  }

  async unseal(): Promise<void> {
    if (this.vault.sealed()) await this.vault.unseal(this.unsealKey);
  }

  async cleanup(): Promise<void> {
    await this.stopController();
    const mine = await this.cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.test=${this.testLabel}`] } });
    await Promise.all(mine.map((c) => this.cluster.remove(c, { force: true }).catch(() => undefined)));
    await this.storeOrNull?.close();
    await this.etcd?.stop();
  }

  /** A proc name `<app>.web.web` with a unique app. */
  proc(tag: string): string {
    return `${tag}${Math.random().toString(36).slice(2, 8)}.web.web`;
  }

  async putSpec(name: string, secretFiles: string[][]): Promise<void> {
    const now = new Date().toISOString();
    const spec = {
      name,
      namespace: appOf(name),
      numInstances: 1,
      restartPolicy: "never",
      pod: {
        name,
        namespace: appOf(name),
        version: 1,
        containers: secretFiles.map((files) => ({ image: services.testImage, command: ["sleep", "3600"], secretFiles: files })),
        network: "none",
      },
      createdAt: now,
      updatedAt: now,
    };
    await this.store.put(`${podGroupPrefix}${name}`, JSON.stringify(spec));
  }

  /** What PUT /v2/secrets stores once it has authorized the caller: the encrypted record. */
  async putSecret(proc: string, path: string, content: string, mode = "400"): Promise<void> {
    const app = proc.slice(0, proc.indexOf("."));
    await this.store.put(secretKey(app, proc, path), this.vault.encrypt(app, proc, path, { content, owner: "root", group: "root", mode }));
  }

  async deleteSecret(proc: string, path: string): Promise<void> {
    await this.store.delete(secretKey(proc.slice(0, proc.indexOf(".")), proc, path));
  }

  /** A container labelled as instance 0 of `group` (container index `index`), created, not started. */
  async container(group: string, node = "n1", index = 0, user?: string, env?: string[]): Promise<ContainerRef> {
    return this.cluster.create(node, `${group}.v1-i0-d0${index > 0 ? `-c${index}` : ""}-${Math.random().toString(36).slice(2, 6)}`, {
      image: services.testImage,
      ...(user !== undefined ? { user } : {}),
      ...(env !== undefined ? { env } : {}),
      cmd: ["/bin/sleep", "3600"],
      networkMode: "none",
      labels: {
        "io.capstan.podgroup": group,
        "io.capstan.namespace": "capstan-test",
        "io.capstan.instance": "0",
        "io.capstan.version": "1",
        "io.capstan.drift": "0",
        "io.capstan.container-index": String(index),
        "io.capstan.format": "2",
        "io.capstan.test": this.testLabel,
      },
    });
  }

  async marker(containerId: string): Promise<Marker | undefined> {
    const kv = await this.store.get(`${defaultMarkerPrefix}${containerId}`);
    return kv ? (JSON.parse(kv.value) as Marker) : undefined;
  }

  /** Poll until `check` returns a value (not undefined/false), or fail with the last observation. */
  until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 15_000, everyMs = 100): Promise<T> {
    return pollUntil(what, check, timeoutMs, everyMs);
  }

}

function docker(node: string): Docker {
  const endpoint = services.engines[node];
  if (!endpoint) throw new Error(`no engine ${node}`);
  return new Docker({ socketPath: socketPath(endpoint) });
}

/** `docker exec` of a shell command in a running container: its stdout (stderr goes with it). */
export async function exec(ref: ContainerRef, command: string): Promise<string> {
  const c = docker(ref.node).getContainer(ref.id);
  const e = await c.exec({ Cmd: ["sh", "-c", command], AttachStdout: true, AttachStderr: true, Tty: true });
  const stream = await e.start({ hijack: true, stdin: false, Tty: true });
  const chunks: Buffer[] = [];
  stream.on("data", (b: Buffer) => chunks.push(b));
  await new Promise<void>((resolve, reject) => {
    stream.on("end", () => resolve());
    stream.on("error", reject);
    setTimeout(() => reject(new Error(`exec ${command} did not finish in 10 s`)), 10_000).unref();
  });
  return Buffer.concat(chunks).toString("utf8").replace(/\r\n/g, "\n");
}

export interface ArchivedFile {
  uid: number;
  gid: number;
  mode: number;
  content: string;
}

/**
 * A file as the engine's archive read (GET /containers/{id}/archive) shows it: works on created
 * containers, which cannot exec. Undefined when the path does not exist.
 */
export async function readFileOf(ref: ContainerRef, path: string): Promise<ArchivedFile | undefined> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker(ref.node).getContainer(ref.id).getArchive({ path });
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return undefined;
    throw e;
  }
  const x = extract();
  let found: ArchivedFile | undefined;
  x.on("entry", (header, body, next) => {
    const parts: Buffer[] = [];
    body.on("data", (b: unknown) => {
      parts.push(b as Buffer);
    });
    body.on("end", () => {
      found ??= { uid: header.uid ?? -1, gid: header.gid ?? -1, mode: (header.mode ?? 0) & 0o7777, content: Buffer.concat(parts).toString("utf8") };
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    x.on("finish", () => resolve());
    x.on("error", reject);
    Readable.from(stream as AsyncIterable<Buffer>).pipe(x);
  });
  return found;
}
