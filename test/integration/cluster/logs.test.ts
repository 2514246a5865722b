// Cluster.logs against the real engines (scripts/services): stdout and stderr told apart, tail,
// since, timestamps, a TTY container's raw stream, follow delivering a line written after it
// opened, and the engine's reader ending when the consumer breaks out or aborts (observed on the
// engine: its descriptors on the container's log file).
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, EngineUnavailableError, NotFoundError, type ContainerRef, type CreateSpec, type LogFrame, type LogStream } from "../../../adapters/cluster/index.ts";
import { engineDescriptorsOn, logPathOf } from "../../helpers/engine-log-readers.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const exec = promisify(execFile);
const services = loadServices();
const run = uniqueName("logs");
const testLabel = "io.capstan.test";
let cluster: DockerCluster;

/** Prints known lines to both streams, then waits to be told (by exec) to print more. */
const script = [
  "echo out-1",
  "echo err-1 >&2",
  "echo out-2",
  "echo err-2 >&2",
  "echo out-3",
  "trap 'exit 0' TERM",
  "while true; do sleep 1 & wait $!; done",
].join("; ");

function spec(over: Partial<CreateSpec> = {}): CreateSpec {
  return { image: services.testImage, cmd: ["sh", "-c", script], networkMode: "none", labels: { [testLabel]: run }, ...over };
}

async function started(node: string, name: string, over: Partial<CreateSpec> = {}): Promise<ContainerRef> {
  const ref = await cluster.create(node, `${run}-${name}`, spec(over));
  await cluster.start(ref);
  return ref;
}

/** Every frame of a stream that ends. */
async function drain(stream: LogStream): Promise<LogFrame[]> {
  const frames: LogFrame[] = [];
  for await (const batch of stream) frames.push(...batch);
  return frames;
}

const text = (frames: LogFrame[], which: LogFrame["stream"]) =>
  Buffer.concat(frames.filter((f) => f.stream === which).map((f) => f.data)).toString("utf8");

/** Runs a shell command in the container that writes to its main process's stdout (the log). */
async function say(ref: ContainerRef, line: string): Promise<void> {
  await exec("docker", ["-H", services.engines[ref.node]!, "exec", ref.id, "sh", "-c", `echo ${line} > /proc/1/fd/1`], { timeout: 20_000 });
}

/** Waits until the container has written `line` (the engine has it in its log). */
async function logged(ref: ContainerRef, line: string): Promise<void> {
  await pollUntil(`${line} in the log of ${ref.id}`, async () => (await drain(await cluster.logs(ref))).some((f) => f.data.toString().includes(line)), 20_000);
}

beforeAll(() => {
  cluster = DockerCluster.fromSpec(services.cluster);
});

afterAll(async () => {
  const leftovers = await cluster.listContainers(undefined, { all: true, filters: { label: [`${testLabel}=${run}`] } });
  await Promise.all(leftovers.map((c) => cluster.remove(c, { force: true, volumes: true })));
});

describe("Cluster.logs", () => {
  let plain: ContainerRef;

  beforeAll(async () => {
    plain = await started("n2", "plain");
    await logged(plain, "out-3");
  });

  it("tells stdout and stderr apart, each stream in the order written", async () => {
    const stream = await cluster.logs(plain);
    expect(stream.tty).toBe(false);
    const frames = await drain(stream);
    expect(text(frames, "stdout")).toBe("out-1\nout-2\nout-3\n");
    expect(text(frames, "stderr")).toBe("err-1\nerr-2\n");
    // One frame per line. Across the two streams the engine records lines in the order its two
    // readers got them, which need not be the order of writes microseconds apart.
    expect(frames.map((f) => f.data.toString().trim()).sort()).toEqual(["err-1", "err-2", "out-1", "out-2", "out-3"]);
  });

  it("keeps the last lines with tail, starts each frame with its time, and cuts with since", async () => {
    const all = (await drain(await cluster.logs(plain, { timestamps: true }))).map((f) => f.data.toString());
    expect(all).toHaveLength(5);
    for (const f of all) expect(f).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (out|err)-\d\n$/);
    const tail = (await drain(await cluster.logs(plain, { tail: 2, timestamps: true }))).map((f) => f.data.toString());
    expect(tail).toEqual(all.slice(3));

    // since = the time of one line (to the microsecond, rounded down): the lines from then on.
    const stamps = all.map((f) => f.slice(0, 30));
    const third = [...stamps].sort()[2]!;
    const m = /^(\S{19})\.(\d{9})Z$/.exec(third)!;
    const sinceMs = Date.parse(`${m[1]}Z`) + Math.floor(Number(m[2]) / 1000) / 1000;
    const later = (await drain(await cluster.logs(plain, { since: sinceMs, timestamps: true }))).map((f) => f.data.toString());
    expect(later).toEqual(all.filter((f) => f.slice(0, 30) >= third));
    expect(later).toHaveLength(3);
    expect(await drain(await cluster.logs(plain, { since: Date.now() + 60_000 }))).toEqual([]);
  });

  it("reads a TTY container's one raw stream, stderr included", async () => {
    const tty = await started("n1", "tty", { tty: true });
    await logged(tty, "out-3");
    const stream = await cluster.logs(tty);
    expect(stream.tty).toBe(true);
    const frames = await drain(stream);
    expect(frames.every((f) => f.stream === "stdout")).toBe(true);
    // One terminal: both streams, in order, with the terminal's line ends.
    expect(text(frames, "stdout")).toBe("out-1\r\nerr-1\r\nout-2\r\nerr-2\r\nout-3\r\n");
  });

  it("follows: a line written after the stream opened arrives; breaking out ends the engine's reader", async () => {
    const path = await logPathOf(plain.node, plain.id);
    expect(await engineDescriptorsOn(plain.node, path)).toBe(1); // the container's own log writer
    const stream = await cluster.logs(plain, { follow: true, tail: 0 });
    await pollUntil("the engine to open its follow reader", async () => (await engineDescriptorsOn(plain.node, path)) === 2, 10_000);
    const it = stream[Symbol.asyncIterator]();
    const line = `late-${Date.now()}`;
    await say(plain, line);
    const next = await it.next();
    expect(next.done).toBe(false);
    expect((next.value as LogFrame[]).map((f) => f.data.toString())).toEqual([`${line}\n`]);
    // Nothing more is coming: return() must not wait for a next chunk.
    const before = Date.now();
    await it.return!();
    expect(Date.now() - before).toBeLessThan(1_000);
    await pollUntil("the engine to close its follow reader", async () => (await engineDescriptorsOn(plain.node, path)) === 1, 10_000);
  });

  it("follows until the signal aborts, rejecting with its reason and ending the engine's reader", async () => {
    const path = await logPathOf(plain.node, plain.id);
    const ac = new AbortController();
    const stream = await cluster.logs(plain, { follow: true, signal: ac.signal });
    const reading = drain(stream);
    await pollUntil("the engine to open its follow reader", async () => (await engineDescriptorsOn(plain.node, path)) === 2, 10_000);
    const reason = new Error("enough");
    ac.abort(reason);
    await expect(reading).rejects.toBe(reason);
    await pollUntil("the engine to close its follow reader", async () => (await engineDescriptorsOn(plain.node, path)) === 1, 10_000);
  });

  it("ends a follow stream when the container stops", async () => {
    const short = await started("n1", "short", { cmd: ["sh", "-c", "echo first; sleep 600"] });
    await logged(short, "first");
    const reading = drain(await cluster.logs(short, { follow: true }));
    await cluster.stop(short, { timeoutSeconds: 0 });
    expect(text(await reading, "stdout")).toBe("first\n");
  });

  it("refuses a bad timeout before any call", async () => {
    await expect(cluster.logs(plain, { timeoutMs: 0 })).rejects.toThrow(/timeout must be > 0/);
  });

  it("is a NotFoundError for a container the engine does not have, and for an unknown node", async () => {
    await expect(cluster.logs({ node: "n1", id: `${run}-nope` })).rejects.toBeInstanceOf(NotFoundError);
    await expect(cluster.logs({ node: "n9", id: "x" })).rejects.toMatchObject({ name: "NotFoundError", resource: "node" });
  });

  it("is an EngineUnavailableError for an engine that does not answer", async () => {
    const dead = DockerCluster.fromSpec("n1=unix:///nonexistent/docker.sock");
    await expect(dead.logs({ node: "n1", id: "x" })).rejects.toBeInstanceOf(EngineUnavailableError);
  });
});
