// The PodGroup API served over real HTTP on loopback, backed by the shared etcd (scripts/services).
// Keys under /platform/orchestrator/ are fixed, so a test namespaces by name instead: every
// PodGroup and node record it makes starts with its run prefix, and cleanup() removes those
// prefixes (groups, statuses, node records) and the refresh tasks that name them.
import { serve, type ServerType } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { expect } from "vitest";
import type { Cluster } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { orchestratorInformers, type OrchestratorInformers } from "../../../api/orchestrator/informers.ts";
import { createPodGroupApi } from "../../../api/orchestrator/podgroups.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { NodeRecord } from "../../../api/resources/node.ts";
import type { RefreshTask, Task } from "../../../api/resources/task.ts";
import { loadServices } from "../../helpers/services.ts";
import { openAccess } from "../../helpers/access.ts";

export interface Answer {
  status: number;
  body: Record<string, unknown> & { code?: string; reason?: string; message?: string; details?: { path: string; message: string }[] };
}

export class ApiHarness {
  readonly store: EtcdStore;
  readonly informers: OrchestratorInformers;
  private server: ServerType | undefined;
  base = "";

  /** With `cluster`, the API also serves GET /api/podgroups/logs from it. */
  constructor(
    readonly run: string,
    private readonly cluster?: Cluster,
  ) {
    this.store = new EtcdStore({ endpoints: loadServices().etcdEndpoints });
    this.informers = orchestratorInformers(this.store);
  }

  async start(): Promise<void> {
    this.informers.nodes.start();
    this.informers.podGroups.start();
    await Promise.all([this.informers.nodes.waitForSync(), this.informers.podGroups.waitForSync()]);
    const app = createPodGroupApi({ store: this.store, ...this.informers, access: openAccess, ...(this.cluster && { cluster: this.cluster }) });
    await new Promise<void>((resolve) => {
      this.server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
        this.base = `http://127.0.0.1:${info.port}`;
        resolve();
      });
    });
  }

  async stop(): Promise<void> {
    await this.cleanup();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    await Promise.all([this.informers.nodes.stop(), this.informers.podGroups.stop()]);
    await this.store.close();
  }

  async cleanup(): Promise<void> {
    await this.store.deletePrefix(keys.podGroups + this.run);
    await this.store.deletePrefix(keys.podGroupStatus + this.run);
    await this.store.deletePrefix(keys.podGroupHistory + this.run);
    await this.store.deletePrefix(keys.nodes + this.run);
    for (const task of await this.tasks()) await this.store.delete(keys.task(task.id));
  }

  /** Refresh tasks naming one of this run's groups. */
  async tasks(): Promise<RefreshTask[]> {
    const { items } = await this.store.list(keys.tasks);
    // The shared etcd may hold other kinds of task (drift tasks name no single group).
    return items
      .map((kv) => JSON.parse(kv.value) as Task)
      .filter((t): t is RefreshTask => t.kind === "refresh" && t.podGroup.startsWith(this.run));
  }

  async call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
    const init: RequestInit = { method, headers: headers ?? (body === undefined ? {} : { "content-type": "application/json" }) };
    if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
    const res = await fetch(this.base + path, { ...init, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    return { status: res.status, body: JSON.parse(text) as Answer["body"] };
  }

  /**
   * Wait until the informer of `key`'s prefix reflects the key's last write (feasibility reads the
   * informers). Waiting for the write's own revision is immediate: the watch delivers it as an event.
   */
  async settle(key: string): Promise<void> {
    const kv = await this.store.get(key);
    const revision = kv?.modRevision ?? (await this.store.revision());
    const informer = key.startsWith(keys.nodes) ? this.informers.nodes : this.informers.podGroups;
    await informer.waitForRevision(revision);
  }

  async putNode(name: string, cpus: number, memoryBytes: number, state: NodeRecord["state"] = "ready"): Promise<void> {
    const record: NodeRecord = {
      name,
      address: "127.0.0.1",
      endpoint: `unix:///nonexistent/${name}.sock`,
      labels: {},
      state,
      cpus,
      memoryBytes,
      reserved: { cpus: 0, memoryBytes: 0 },
      containers: 0,
      containersRunning: 0,
      engineVersion: "test",
      updatedAt: new Date().toISOString(),
    };
    const { revision } = await this.store.put(keys.node(name), JSON.stringify(record));
    await this.informers.nodes.waitForRevision(revision);
  }

  async stored<T = Record<string, unknown>>(key: string): Promise<T | null> {
    const kv = await this.store.get(key);
    return kv === null ? null : (JSON.parse(kv.value) as T);
  }

  /**
   * Run `request` and assert it left the store as it was: the store's revision did not move. Other
   * processes may share this etcd, so a moved revision is retried (up to 3 times): a handler that
   * writes moves it on every attempt, a stranger's write only now and then.
   */
  async expectNoWrite(request: () => Promise<Answer>): Promise<Answer> {
    let answer: Answer | undefined;
    for (let attempt = 0; attempt < 3; attempt++) {
      const before = await this.store.revision();
      answer = await request();
      if ((await this.store.revision()) === before) return answer;
    }
    expect.fail(`the store's revision moved on each of 3 attempts: the request wrote (answer ${JSON.stringify(answer)})`);
  }
}
