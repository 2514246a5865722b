// GET /api/podgroups/logs over real HTTP, on containers of the real engines (scripts/services). The
// group's status record is written here, as the controller would, pointing at containers this test
// made: instance 0 on n1, instance 1 on n2, instance 2 with a TTY, and records for the failure
// cases (a container the engine no longer has, a node the cluster does not know, an instance
// without a container). Lines are written by `docker exec` one after the other, so their order in
// time is known and the merge can be checked exactly.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerRef } from "../../../adapters/cluster/index.ts";
import { keys } from "../../../api/resources/keys.ts";
import type { PodGroupStatus, PodStatus } from "../../../api/resources/podgroup.ts";
import { engineDescriptorsOn, logPathOf } from "../../helpers/engine-log-readers.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { ApiHarness } from "./support.ts";

const exec = promisify(execFile);
const services = loadServices();
const run = uniqueName("logs");
const testLabel = "io.capstan.test";
const cluster = DockerCluster.fromSpec(services.cluster);
const api = new ApiHarness(run, cluster);
const group = `${run}-web`;
const q = (params: Record<string, string>) => `/api/podgroups/logs?${new URLSearchParams({ name: group, ...params }).toString()}`;

// Quiet until told: every line comes from `say`, so the test knows their order.
const idle = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"];
const refs: ContainerRef[] = [];

/** Writes `line` to the container's stdout or stderr (its main process's, which the engine logs). */
async function say(ref: ContainerRef, stream: "stdout" | "stderr", line: string): Promise<void> {
  const fd = stream === "stdout" ? 1 : 2;
  await exec("docker", ["-H", services.engines[ref.node]!, "exec", ref.id, "sh", "-c", `echo ${line} > /proc/1/fd/${fd}`], { timeout: 20_000 });
}

async function container(node: string, name: string, tty = false): Promise<ContainerRef> {
  const ref = await cluster.create(node, `${group}.v1-${name}`, { image: services.testImage, cmd: idle, networkMode: "none", labels: { [testLabel]: run }, tty });
  await cluster.start(ref);
  refs.push(ref);
  return ref;
}

const pod = (instanceNo: number, c: { id: string; name: string; node: string }[], state: PodStatus["state"] = "running"): PodStatus => ({
  instanceNo,
  state,
  lastError: "",
  restartCount: 0,
  driftCount: 0,
  version: 1,
  node: c[0]?.node ?? "n1",
  containers: c.map((x) => ({ ...x, nodeIp: "127.0.0.1", ip: "", status: "running" })),
});

// Written as the release before 1-based instance numbers wrote them (no instanceBase): the API reads
// instance k of such a record as k + 1 (docs/api-reference.md, PodStatus).
async function writeStatus(pods: PodStatus[], name = group): Promise<void> {
  const status: PodGroupStatus = { state: "running", lastError: "", updatedAt: new Date().toISOString(), observedVersion: 1, pods };
  await api.store.put(keys.podGroupStatusOf(name), JSON.stringify(status));
}

interface Got {
  status: number;
  type: string;
  headers: Headers;
  text: string;
}

async function get(path: string, headers: Record<string, string> = {}): Promise<Got> {
  const res = await fetch(api.base + path, { headers, signal: AbortSignal.timeout(20_000) });
  return { status: res.status, type: res.headers.get("content-type") ?? "", headers: res.headers, text: await res.text() };
}

const linesOf = (text: string) => text.split("\n").filter((l) => l !== "");
const ndjson = { accept: "application/x-ndjson" };

let i0: ContainerRef;
let i1: ContainerRef;
let tty: ContainerRef;
let gone: ContainerRef;

beforeAll(async () => {
  await api.start();
  const spec = { name: group, namespace: "test", numInstances: 0, restartPolicy: "never", pod: { namespace: "test", network: "none", containers: [{ image: services.testImage }] } };
  expect((await api.call("POST", "/api/podgroups", spec)).status).toBe(202);
  [i0, i1, tty, gone] = await Promise.all([container("n1", "i0-d0"), container("n2", "i1-d0"), container("n1", "i2-d0", true), container("n2", "i4-d0")]);
  await cluster.remove(gone, { force: true });
  await writeStatus([
    pod(0, [{ id: i0.id, name: `${group}.v1-i0-d0`, node: "n1" }]),
    pod(1, [{ id: i1.id, name: `${group}.v1-i1-d0`, node: "n2" }]),
    pod(2, [{ id: tty.id, name: `${group}.v1-i2-d0`, node: "n1" }]),
    pod(3, [], "pending"),
  ]);
  // One line after the other, alternating instances and streams.
  await say(i0, "stdout", "a1");
  await say(i1, "stderr", "b1");
  await say(i0, "stderr", "a2");
  await say(i1, "stdout", "b2");
  await say(tty, "stdout", "t1");
  await say(tty, "stderr", "t2");
  await pollUntil("the engines to have every line", async () => linesOf((await get(q({}))).text).length === 6, 20_000);
}, 120_000);

afterAll(async () => {
  await Promise.all(refs.map((r) => cluster.remove(r, { force: true }).catch(() => undefined)));
  await api.stop(); // removes this run's specs and statuses
});

describe("GET /api/podgroups/logs", () => {
  it("merges every instance's lines in time order as text, each with INSTANCE@NODE and its stream", async () => {
    const a = await get(q({}));
    expect(a.status).toBe(200);
    expect(a.type).toBe("text/plain; charset=utf-8");
    expect(a.headers.get("x-content-type-options")).toBe("nosniff");
    expect(a.headers.get("cache-control")).toBe("no-store");
    expect(linesOf(a.text)).toEqual(["1@n1 stdout a1", "2@n2 stderr b1", "1@n1 stderr a2", "2@n2 stdout b2", "3@n1 stdout t1", "3@n1 stdout t2"]);
  });

  it("reads one instance", async () => {
    expect(linesOf((await get(q({ instance: "2" }))).text)).toEqual(["2@n2 stderr b1", "2@n2 stdout b2"]);
  });

  it("reads a TTY container's one stream: stderr too as stdout, without the terminal's \\r", async () => {
    const a = await get(q({ instance: "3" }));
    expect(a.text).toBe("3@n1 stdout t1\n3@n1 stdout t2\n");
  });

  it("answers NDJSON for Accept: application/x-ndjson, with times only when asked", async () => {
    const plain = await get(q({ instance: "1" }), ndjson);
    expect(plain.type).toBe("application/x-ndjson");
    expect(linesOf(plain.text).map((l) => JSON.parse(l))).toEqual([
      { instance: 1, container: 0, node: "n1", stream: "stdout", line: "a1" },
      { instance: 1, container: 0, node: "n1", stream: "stderr", line: "a2" },
    ]);
    const timed = linesOf((await get(q({ timestamps: "true" }), ndjson)).text).map((l) => JSON.parse(l) as { time: string; line: string });
    expect(timed.map((r) => r.line)).toEqual(["a1", "b1", "a2", "b2", "t1", "t2"]);
    for (const r of timed) expect(r.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    expect(timed.map((r) => r.time)).toEqual(timed.map((r) => r.time).sort());
  });

  it("shows times in text with timestamps=true, keeps the last lines per container with tail, cuts with since", async () => {
    const timed = linesOf((await get(q({ timestamps: "true", instance: "2" }))).text);
    expect(timed).toHaveLength(2);
    expect(timed[0]).toMatch(/^2@n2 stderr \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z b1$/);

    expect(linesOf((await get(q({ tail: "1" }))).text)).toEqual(["1@n1 stderr a2", "2@n2 stdout b2", "3@n1 stdout t2"]);
    expect((await get(q({ tail: "0" }))).text).toBe("");

    const times = linesOf((await get(q({ timestamps: "true" }), ndjson)).text).map((l) => JSON.parse(l) as { time: string; line: string });
    const b1 = times.find((r) => r.line === "b1")!.time; // RFC 3339 with nanoseconds, as since takes it
    expect(linesOf((await get(q({ since: b1 }))).text)).toEqual(["2@n2 stderr b1", "1@n1 stderr a2", "2@n2 stdout b2", "3@n1 stdout t1", "3@n1 stdout t2"]);
    expect((await get(q({ since: "2099-01-01T00:00:00Z" }))).text).toBe("");
    expect(linesOf((await get(q({ since: "1h" }))).text)).toHaveLength(6);
  });

  it.each([
    ["tail", { tail: "-1" }],
    ["tail", { tail: "ten" }],
    ["since", { since: "10" }],
    ["since", { since: "yesterday" }],
    ["instance", { instance: "x" }],
    ["follow", { follow: "yes" }],
    ["timestamps", { timestamps: "1" }],
  ])("answers 400 naming %s for %j", async (field, params) => {
    const a = await api.call("GET", q(params));
    expect(a.status).toBe(400);
    expect(a.body.code).toBe("BadRequest");
    expect(a.body.details?.map((d) => d.path)).toEqual([field]);
  });

  it("answers 400 for instance 0: instances are numbered from 1", async () => {
    const a = await api.call("GET", q({ instance: "0" }));
    expect([a.status, a.body.details?.map((d) => d.path)]).toEqual([400, ["instance"]]);
    expect(JSON.stringify(a.body)).toContain("instances are numbered from 1");
  });

  it("answers 404 for an unknown group, an unknown instance, and an instance without a container", async () => {
    const unknown = await api.call("GET", `/api/podgroups/logs?name=${run}-nope`);
    expect([unknown.status, unknown.body.code]).toEqual([404, "NotFound"]);
    const instance = await api.call("GET", q({ instance: "8" }));
    expect(instance.status).toBe(404);
    expect(instance.body.message).toBe(`podgroup ${group} has no instance 8 (instances: 1, 2, 3, 4)`);
    const pending = await api.call("GET", q({ instance: "4" }));
    expect(pending.status).toBe(404);
    expect(pending.body.message).toContain("has no container (state pending)");
  });

  describe("containers whose logs cannot be read", () => {
    const other = `${run}-broken`;
    const oq = (params: Record<string, string>) => `/api/podgroups/logs?${new URLSearchParams({ name: other, ...params }).toString()}`;

    beforeAll(async () => {
      const spec = { name: other, namespace: "test", numInstances: 0, restartPolicy: "never", pod: { namespace: "test", containers: [{ image: services.testImage }] } };
      expect((await api.call("POST", "/api/podgroups", spec)).status).toBe(202);
      await writeStatus(
        [
          pod(0, [{ id: i0.id, name: `${other}.v1-i0-d0`, node: "n1" }]),
          pod(4, [{ id: gone.id, name: `${other}.v1-i4-d0`, node: "n2" }]),
          pod(5, [{ id: "abc", name: `${other}.v1-i5-d0`, node: "n9" }]),
        ],
        other,
      );
    });

    it("puts a failure line in the stream for each, and goes on with the others", async () => {
      const lines = linesOf((await get(oq({}))).text);
      expect(lines.filter((l) => !l.includes(" error "))).toEqual(["1@n1 stdout a1", "1@n1 stderr a2"]);
      const errors = lines.filter((l) => l.includes(" error "));
      expect(errors).toHaveLength(2);
      expect(errors.find((l) => l.startsWith("5@n2 error "))).toMatch(/no such container/i);
      expect(errors.find((l) => l.startsWith("6@n9 error "))).toMatch(/unknown node "n9"/);
      const records = linesOf((await get(oq({}), ndjson)).text).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(records.find((r) => r.instance === 5)).toEqual({ instance: 5, container: 0, node: "n2", error: expect.stringMatching(/no such container/i) });
    });

    it("answers 404 when every container it reads is gone, 503 when none can be read for another reason", async () => {
      const goneOnly = await api.call("GET", oq({ instance: "5" }));
      expect([goneOnly.status, goneOnly.body.code]).toEqual([404, "NotFound"]);
      expect(goneOnly.body.message).toContain("no longer exist");
      const unknownNode = await api.call("GET", oq({ instance: "6" }));
      expect([unknownNode.status, unknownNode.body.code]).toEqual([503, "Unavailable"]);
      expect(unknownNode.body.message).toMatch(/unknown node "n9"/);
    });
  });

  it("follows: a line written after the request started arrives; the client's disconnect ends the engines' readers", async () => {
    const paths = await Promise.all([logPathOf(i0.node, i0.id), logPathOf(i1.node, i1.id)]);
    const readers = () => Promise.all([engineDescriptorsOn(i0.node, paths[0]), engineDescriptorsOn(i1.node, paths[1])]);
    expect(await readers()).toEqual([1, 1]); // each container's own log writer

    const client = new AbortController();
    const res = await fetch(api.base + q({ follow: "true", tail: "1" }), { signal: client.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    const until = async (text: string) => {
      while (!seen.includes(text)) {
        const r = await reader.read();
        if (r.done) throw new Error(`the stream ended before ${text}; it had: ${seen}`);
        seen += decoder.decode(r.value, { stream: true });
      }
    };
    await until("2@n2 stdout b2\n"); // the tail
    await pollUntil("the engines to follow both containers", async () => (await readers()).every((n) => n === 2), 10_000);
    await say(i1, "stderr", "late-b");
    await until("2@n2 stderr late-b\n");
    await say(i0, "stdout", "late-a");
    await until("1@n1 stdout late-a\n");
    expect(linesOf(seen).slice(-2)).toEqual(["2@n2 stderr late-b", "1@n1 stdout late-a"]);

    client.abort();
    await pollUntil("the engines to end their follow readers", async () => (await readers()).every((n) => n === 1), 10_000);
  });

  it("ends the engine's reader when a follow client closes its connection without reading", async () => {
    const path = await logPathOf(tty.node, tty.id);
    const client = new AbortController();
    const res = await fetch(api.base + q({ follow: "true", instance: "3" }), { signal: client.signal });
    expect(res.status).toBe(200);
    await pollUntil("the engine to follow the TTY container", async () => (await engineDescriptorsOn(tty.node, path)) === 2, 10_000);
    client.abort();
    await pollUntil("the engine to end its follow reader", async () => (await engineDescriptorsOn(tty.node, path)) === 1, 10_000);
  });
});
