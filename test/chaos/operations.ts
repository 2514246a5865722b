// The chaos run's operations through the real API (docs/development.md, "Chaos suite"): the
// choice is a plain function of the PRNG and the model of what the run asked for, so a seed
// replays the same operations whatever the platform answered; performing one is an HTTP call,
// retried while the orchestrator or the secrets service is down (a fault just restarted it).
import type { ChaosEnv } from "./env.ts";
import type { Rng } from "./prng.ts";

export interface GroupModel {
  name: string;
  numInstances: number;
  /** The value of CHAOS_SPEC in the pod's env; a spec update bumps it. */
  spec: number;
  /** The content of the group's secret file app.env, when its pod lists one. */
  secret?: string;
}

/** What the run has asked for so far: the desired state, as the run knows it. */
export class Model {
  readonly groups = new Map<string, GroupModel>();
  /** Groups deleted: the API must no longer serve them once the run is quiet. */
  readonly deleted = new Set<string>();
  created = 0;

  constructor(readonly app: string) {}

  list(): GroupModel[] {
    return [...this.groups.values()].sort((a, b) => a.name.localeCompare(b.name));
  }
}

export type Operation =
  | { kind: "create"; group: string; numInstances: number; secret?: string }
  | { kind: "scale"; group: string; numInstances: number }
  | { kind: "update"; group: string; spec: number; withSecret: boolean }
  | { kind: "delete"; group: string }
  | { kind: "drift"; group: string; from: string }
  | { kind: "secret"; group: string; content: string };

export const secretFile = "app.env";
/** Where Secret-sync installs a relative secret path (docs/secret-sync.md). */
export const secretPath = `/platform/app/${secretFile}`;
export const maxGroups = 5;
export const maxInstances = 4;

/** The next operation, drawn from `rng`, applied to `model` (which it changes). */
export function nextOperation(rng: Rng, model: Model, nodes: readonly string[]): Operation {
  const groups = model.list();
  const secretGroups = groups.filter((g) => g.secret !== undefined);
  const kind = rng.weighted({
    create: groups.length < maxGroups ? (groups.length < 2 ? 6 : 2) : 0,
    scale: groups.length > 0 ? 3 : 0,
    update: groups.length > 0 ? 2 : 0,
    delete: groups.length > 2 ? 1 : 0,
    drift: groups.length > 0 ? 1 : 0,
    secret: secretGroups.length > 0 ? 2 : 0,
  });
  const content = () => `CHAOS_KEY=${rng.int(1e9).toString(36)}\n`;
  switch (kind) {
    case "create": {
      const name = `${model.app}.web.g${++model.created}`;
      const op: Operation = { kind, group: name, numInstances: rng.between(1, 3), ...(rng.chance(0.5) && { secret: content() }) };
      model.groups.set(name, { name, numInstances: op.numInstances, spec: 1, ...(op.secret !== undefined && { secret: op.secret }) });
      return op;
    }
    case "scale": {
      const g = rng.pick(groups);
      g.numInstances = rng.between(0, maxInstances);
      return { kind, group: g.name, numInstances: g.numInstances };
    }
    case "update": {
      const g = rng.pick(groups);
      g.spec += 1;
      return { kind, group: g.name, spec: g.spec, withSecret: g.secret !== undefined };
    }
    case "delete": {
      const g = rng.pick(groups);
      model.groups.delete(g.name);
      model.deleted.add(g.name);
      return { kind, group: g.name };
    }
    case "drift":
      return { kind, group: rng.pick(groups).name, from: rng.pick(nodes) };
    case "secret": {
      const g = rng.pick(secretGroups);
      g.secret = content();
      return { kind, group: g.name, content: g.secret };
    }
  }
}

export function describeOperation(op: Operation): string {
  switch (op.kind) {
    case "create":
      return `create ${op.group} x${op.numInstances}${op.secret !== undefined ? " with secret file" : ""}`;
    case "scale":
      return `scale ${op.group} to ${op.numInstances}`;
    case "update":
      return `update ${op.group} spec CHAOS_SPEC=${op.spec}`;
    case "delete":
      return `delete ${op.group}`;
    case "drift":
      return `drift ${op.group} off ${op.from}`;
    case "secret":
      return `change the secret of ${op.group}`;
  }
}

/** The pod of a group: busybox sleepers that stop at once on SIGTERM, no network. */
export function podOf(model: Model, g: { spec: number; withSecret: boolean }, image: string): Record<string, unknown> {
  const stopsOnTerm = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
  return {
    namespace: model.app,
    network: "none",
    containers: [
      {
        image,
        command: ["/bin/sh", "-c", stopsOnTerm],
        env: [`CHAOS_SPEC=${g.spec}`],
        ...(g.withSecret && { secretFiles: [secretFile] }),
      },
    ],
  };
}

/** Carry out `op` through the API (it needs nothing of the model but the app); throws when the platform refused it for good. */
export async function performOperation(env: ChaosEnv, model: Model, op: Operation): Promise<void> {
  const image = env.services.testImage;
  const q = encodeURIComponent(op.group);
  switch (op.kind) {
    case "create":
      if (op.secret !== undefined) await putSecret(env, model, op.group, op.secret);
      return expect202(
        "POST /api/podgroups",
        () =>
          env.api("POST", "/api/podgroups", {
            name: op.group,
            namespace: model.app,
            numInstances: op.numInstances,
            restartPolicy: "always",
            pod: podOf(model, { spec: 1, withSecret: op.secret !== undefined }, image),
          }),
        // A create retried after a lost answer finds its own group.
        [409],
      );
    case "scale":
      return expect202("PATCH cmd=replica", () => env.api("PATCH", `/api/podgroups?name=${q}&cmd=replica&num_instances=${op.numInstances}`));
    case "update": {
      const pod = podOf(model, { spec: op.spec, withSecret: op.withSecret }, image);
      return expect202("PATCH cmd=spec", () => env.api("PATCH", `/api/podgroups?name=${q}&cmd=spec`, pod));
    }
    case "delete":
      return expect202("DELETE /api/podgroups", () => env.api("DELETE", `/api/podgroups?name=${q}`), [404]);
    case "drift":
      return expect202("PATCH /api/nodes cmd=drift", () => env.api("PATCH", `/api/nodes?cmd=drift&from=${op.from}&pg=${q}`));
    case "secret":
      return putSecret(env, model, op.group, op.content);
  }
}

async function putSecret(env: ChaosEnv, model: Model, group: string, content: string): Promise<void> {
  const path = `/v2/secrets?app=${encodeURIComponent(model.app)}&proc=${encodeURIComponent(group)}&path=${secretFile}`;
  await retrying(`PUT ${path}`, () => env.secretsApi("PUT", path, { content, mode: "400" }), [200]);
}

function expect202(what: string, call: () => Promise<{ status: number; body: unknown }>, alsoOk: number[] = []): Promise<void> {
  return retrying(what, call, [202, ...alsoOk]);
}

/** Retry while the server is unreachable or not ready (503) for up to 60 s; any other answer ends it. */
async function retrying(what: string, call: () => Promise<{ status: number; body: unknown }>, ok: number[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await call();
      if (ok.includes(res.status)) return;
      last = `${res.status} ${JSON.stringify(res.body)}`;
      if (res.status !== 503) break;
    } catch (e) {
      last = (e as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what}: ${last}`);
}
