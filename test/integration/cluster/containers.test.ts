// The cluster adapter against the two real engines (scripts/services): container lifecycle on each
// node, listing, parallel writes, typed errors, node resources, network info, bounded calls.
import { createServer, type Server, type Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ConflictError,
  DockerCluster,
  EngineUnavailableError,
  InvalidRequestError,
  NotFoundError,
  type ContainerRef,
  type CreateSpec,
} from "../../../adapters/cluster/index.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const nodes = Object.keys(services.engines);
const run = uniqueName("clu");
const testLabel = "io.capstan.test";

let cluster: DockerCluster;

function spec(over: Partial<CreateSpec> = {}): CreateSpec {
  return {
    image: services.testImage,
    cmd: ["sleep", "600"],
    networkMode: "none",
    labels: { [testLabel]: run },
    ...over,
  };
}

beforeAll(() => {
  expect(nodes).toEqual(["n1", "n2"]);
  cluster = DockerCluster.fromSpec(services.cluster);
});

afterAll(async () => {
  const leftovers = await cluster.listContainers(undefined, { all: true, filters: { label: [`${testLabel}=${run}`] } });
  await Promise.all(leftovers.map((c) => cluster.remove(c, { force: true, volumes: true })));
});

describe.each(nodes)("container lifecycle on %s", (node) => {
  it("creates, starts, inspects, stops with a timeout, renames and removes", async () => {
    const name = `${run}-life-${node}`;
    const ref = await cluster.create(node, name, spec({ env: ["A=1"], memoryBytes: 32 << 20, nanoCpus: 250_000_000 }));
    expect(ref.node).toBe(node);
    expect(ref.id).toMatch(/^[0-9a-f]{64}$/);

    const created = await cluster.inspect(ref);
    expect(created).toMatchObject({
      node,
      id: ref.id,
      name,
      image: services.testImage,
      memoryBytes: 32 << 20,
      nanoCpus: 250_000_000,
      cmd: ["sleep", "600"],
      restartPolicy: { name: "no" },
      labels: { [testLabel]: run },
    });
    expect(created.status.state).toBe("created");
    expect(created.env).toContain("A=1");

    await cluster.start(ref);
    await cluster.start(ref); // already running: idempotent, no error
    const running = await cluster.inspect({ node, id: name }); // by name works as well as by id
    expect(running.status.running).toBe(true);
    expect(running.status.startedAt).toBeGreaterThan(0);

    // busybox sleep as PID 1 ignores SIGTERM: stop must wait the grace period, then kill.
    const t0 = Date.now();
    await cluster.stop(ref, { timeoutSeconds: 1 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const stopped = await cluster.inspect(ref);
    expect(stopped.status).toMatchObject({ state: "exited", running: false, exitCode: 137 });
    await cluster.stop(ref, { timeoutSeconds: 1 }); // already stopped: idempotent

    const renamed = `${name}-renamed`;
    await cluster.rename(ref, renamed);
    expect((await cluster.inspect(ref)).name).toBe(renamed);
    await expect(cluster.inspect({ node, id: name })).rejects.toBeInstanceOf(NotFoundError);

    await cluster.start(ref);
    await cluster.remove(ref, { force: true, volumes: true }); // running: force kills it
    await expect(cluster.inspect(ref)).rejects.toMatchObject({ name: "NotFoundError", node, ref: ref.id, resource: "container" });
  });
});

describe("listing", () => {
  const refs: Record<string, ContainerRef> = {};

  beforeAll(async () => {
    refs.a = await cluster.create("n1", `${run}-list-a`, spec({ labels: { [testLabel]: run, role: "a" } }));
    refs.b = await cluster.create("n2", `${run}-list-b`, spec({ labels: { [testLabel]: run, role: "b" } }));
    await cluster.start(refs.a);
  });

  afterAll(async () => {
    await Promise.all(Object.values(refs).map((r) => cluster.remove(r, { force: true })));
  });

  it("lists across nodes with all and label filters, each summary naming its node", async () => {
    const label = [`${testLabel}=${run}`, "role"];
    const runningOnly = await cluster.listContainers(undefined, { filters: { label } });
    expect(runningOnly.map((c) => [c.node, c.name, c.state])).toEqual([["n1", `${run}-list-a`, "running"]]);

    const all = await cluster.listContainers(undefined, { all: true, filters: { label } });
    expect(all.map((c) => [c.node, c.id, c.state]).sort()).toEqual([
      ["n1", refs.a!.id, "running"],
      ["n2", refs.b!.id, "created"],
    ]);
    expect(all.find((c) => c.node === "n2")).toMatchObject({ labels: { role: "b" }, image: services.testImage, networkMode: "none" });
    expect(all[0]!.sizeRootFs).toBeUndefined();

    const onlyB = await cluster.listContainers(undefined, { all: true, filters: { label: [`${testLabel}=${run}`, "role=b"] } });
    expect(onlyB.map((c) => c.name)).toEqual([`${run}-list-b`]);

    const n1 = await cluster.listContainers("n1", { all: true, filters: { label: [`${testLabel}=${run}`] } });
    expect(n1.every((c) => c.node === "n1")).toBe(true);
    expect(n1.map((c) => c.id)).toContain(refs.a!.id);
  });

  it("reports sizes when asked", async () => {
    const [sized] = await cluster.listContainers("n2", { all: true, size: true, filters: { id: [refs.b!.id] } });
    expect(sized!.sizeRootFs).toBeGreaterThan(100_000); // the busybox rootfs
    expect(sized!.sizeRw).toBeGreaterThanOrEqual(0);
  });
});

describe("parallel writes", () => {
  it("creates and starts on both engines at once", async () => {
    const names = nodes.flatMap((node) => Array.from({ length: 6 }, (_, i) => ({ node, name: `${run}-par-${node}-${i}` })));
    const refs = await Promise.all(names.map(({ node, name }) => cluster.create(node, name, spec())));
    await Promise.all(refs.map((r) => cluster.start(r)));
    const listed = await cluster.listContainers(undefined, { filters: { label: [`${testLabel}=${run}`], name: [`${run}-par-`] } });
    expect(listed.map((c) => c.name).sort()).toEqual(names.map((n) => n.name).sort());
    expect(listed.filter((c) => c.node === "n1")).toHaveLength(6);
    await Promise.all(refs.map((r) => cluster.remove(r, { force: true })));
  });
});

describe("typed errors", () => {
  it("answers a duplicate name with ConflictError and keeps working", async () => {
    const name = `${run}-dup`;
    const ref = await cluster.create("n1", name, spec());
    const err = await cluster.create("n1", name, spec()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ node: "n1", ref: name, op: "create" });
    expect((err as Error).message).toMatch(/already in use/);
    // The same name on the other node is a different container: no conflict there.
    const other = await cluster.create("n2", name, spec());
    await cluster.remove(other);
    await cluster.remove(ref);
    const again = await cluster.create("n1", name, spec());
    await cluster.remove(again);
  });

  it("answers a missing container, image or node with NotFoundError", async () => {
    const missing = { node: "n2", id: `${run}-missing` };
    await expect(cluster.remove(missing, { force: true })).rejects.toMatchObject({ name: "NotFoundError", node: "n2", ref: missing.id, resource: "container" });
    await expect(cluster.stop(missing)).rejects.toBeInstanceOf(NotFoundError);
    await expect(cluster.create("n1", `${run}-noimg`, spec({ image: "capstan/absent:none" }))).rejects.toMatchObject({
      name: "NotFoundError",
      resource: "image",
    });
    await expect(cluster.inspect({ node: "n9", id: "x" })).rejects.toMatchObject({ name: "NotFoundError", resource: "node" });
  });

  it("rejects bad input before calling the engine", async () => {
    await expect(cluster.create("n1", "bad name", spec())).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(cluster.stop({ node: "n1", id: "x" }, { timeoutSeconds: -1 })).rejects.toBeInstanceOf(InvalidRequestError);
  });

  it("answers a conflicting remove and rename with ConflictError", async () => {
    const a = await cluster.create("n2", `${run}-cf-a`, spec());
    const b = await cluster.create("n2", `${run}-cf-b`, spec());
    await cluster.start(a);
    await expect(cluster.remove(a)).rejects.toBeInstanceOf(ConflictError); // running, no force
    await expect(cluster.rename(b, `${run}-cf-a`)).rejects.toBeInstanceOf(ConflictError);
    await cluster.remove(a, { force: true });
    await cluster.remove(b);
  });
});

describe("nodes and network", () => {
  it("reports both engines with their resources", async () => {
    const ns = await cluster.nodes();
    expect(ns.map((n) => [n.name, n.state, n.endpoint])).toEqual(nodes.map((n) => [n, "ready", services.engines[n]]));
    for (const n of ns) {
      expect(n.cpus).toBeGreaterThan(0);
      expect(n.memoryBytes).toBeGreaterThan(64 << 20);
      expect(n.engineVersion).toMatch(/^\d+\.\d+/);
      expect(n.address).toBe("127.0.0.1");
      expect(n.containers).toBeGreaterThanOrEqual(n.containersRunning);
    }
  });

  it("gives a container's networks and requested ports", async () => {
    const ref = await cluster.create("n1", `${run}-net`, spec({ expose: [{ containerPort: 8080, hostPort: 18080, hostIp: "127.0.0.1" }] }));
    await cluster.start(ref);
    const net = await cluster.networkInfo(ref);
    expect(net.networkMode).toBe("none");
    expect(net.networks.map((n) => [n.name, n.ipAddress])).toEqual([["none", ""]]);
    expect(net.portBindings).toEqual([{ containerPort: 8080, protocol: "tcp", hostIp: "127.0.0.1", hostPort: 18080 }]);
    expect(net.ports).toEqual([]); // networking is off: nothing actually published
    await cluster.remove(ref, { force: true });
  });
});

describe("unreachable engines", () => {
  let dir: string;
  let silent: Server;
  const held: Socket[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "capstan-cluster-"));
    // An "engine" that accepts connections and never answers: only a timeout ends a call to it.
    silent = createServer((s) => void held.push(s));
    await new Promise<void>((r) => silent.listen(join(dir, "silent.sock"), r));
  });

  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers EngineUnavailableError at once for a missing socket and a closed port", async () => {
    const gone = DockerCluster.fromSpec(`a=unix://${dir}/absent.sock,b=tcp://127.0.0.1:1`);
    for (const node of ["a", "b"]) {
      const t0 = Date.now();
      const err = await gone.inspect({ node, id: "x" }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EngineUnavailableError);
      expect(err).toMatchObject({ node, ref: "x", timedOut: false });
      expect(Date.now() - t0).toBeLessThan(2000);
    }
    expect((await gone.nodes()).map((n) => n.state)).toEqual(["unreachable", "unreachable"]);
  });

  it("bounds every call to a silent engine by its timeout", async () => {
    const hung = DockerCluster.fromSpec(`s=unix://${dir}/silent.sock`, { readTimeoutMs: 300, writeTimeoutMs: 300 });
    const ref = { node: "s", id: "c" };
    const calls: [string, () => Promise<unknown>][] = [
      ["listContainers", () => hung.listContainers("s", { all: true })],
      ["inspect", () => hung.inspect(ref)],
      ["networkInfo", () => hung.networkInfo(ref)],
      ["create", () => hung.create("s", "c1", spec())],
      ["start", () => hung.start(ref)],
      ["stop", () => hung.stop(ref, { timeoutSeconds: 0 })],
      ["remove", () => hung.remove(ref)],
      ["rename", () => hung.rename(ref, "c2")],
    ];
    const t0 = Date.now();
    const results = await Promise.all(calls.map(([, call]) => call().catch((e: unknown) => e)));
    expect(Date.now() - t0).toBeLessThan(3000);
    results.forEach((err, i) => {
      expect(err, calls[i]![0]).toBeInstanceOf(EngineUnavailableError);
      expect(err).toMatchObject({ node: "s", op: calls[i]![0], timedOut: true });
    });
    const [n] = await hung.nodes();
    expect(n).toMatchObject({ state: "unreachable", error: "nodes on s: no answer within 300 ms" });

    // The caller's own signal ends a call sooner, with the caller's reason.
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("caller deadline")), 50);
    await expect(hung.inspect(ref, { signal: ac.signal })).rejects.toThrow("caller deadline");
  });

  it("reports a silent engine unreachable to subscribers (bounded connect)", async () => {
    const hung = DockerCluster.fromSpec(`s=unix://${dir}/silent.sock`, { events: { connectTimeoutMs: 200 } });
    const states: string[] = [];
    const sub = hung.subscribe((e) => e.type === "node" && states.push(`${e.state}:${e.error}`));
    const end = Date.now() + 3000;
    while (states.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    await sub.unsubscribe();
    expect(states).toEqual(["unreachable:event stream did not open within 200 ms"]);
  });
});
