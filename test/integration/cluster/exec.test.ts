// Cluster.exec against the real engines (scripts/services): output with stdout and stderr apart (one
// raw stream on a terminal), the exit code, stdin and its end, a terminal's size, and close()
// killing what still runs, children included, as the engine itself reports it (exec inspect) and as
// a look into the container shows. The engine does not end an exec's process when its connection
// closes; close() must.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConflictError, DockerCluster, InvalidRequestError, NotFoundError, type ContainerRef, type ExecSession, type LogFrame } from "../../../adapters/cluster/index.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const run = uniqueName("exec");
const testLabel = "io.capstan.test";
let cluster: DockerCluster;
let ref: ContainerRef;

/** Reads a session's output to its end: each stream's text, and the exit code. */
async function finish(s: ExecSession): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  const frames: LogFrame[] = [];
  for await (const batch of s.output) frames.push(...batch);
  const text = (which: string) => Buffer.concat(frames.filter((f) => f.stream === which).map((f) => f.data)).toString("utf8");
  const exitCode = await s.exitCode;
  await s.close();
  return { stdout: text("stdout"), stderr: text("stderr"), exitCode };
}

const running = async (text: string) => (await finish(await cluster.exec(ref, { cmd: ["ps", "-o", "pid,args"] }))).stdout.split("\n").filter((l) => l.includes(text));

beforeAll(async () => {
  cluster = DockerCluster.fromSpec(services.cluster);
  ref = await cluster.create("n2", `${run}-box`, { image: services.testImage, cmd: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"], networkMode: "none", labels: { [testLabel]: run } });
  await cluster.start(ref);
});

afterAll(async () => {
  const leftovers = await cluster.listContainers(undefined, { all: true, filters: { label: [`${testLabel}=${run}`] } });
  await Promise.all(leftovers.map((c) => cluster.remove(c, { force: true, volumes: true })));
});

describe("Cluster.exec", () => {
  it("tells stdout and stderr apart and reports the exit code", async () => {
    expect(await finish(await cluster.exec(ref, { cmd: ["sh", "-c", "echo out; echo err >&2; exit 3"] }))).toEqual({ stdout: "out\n", stderr: "err\n", exitCode: 3 });
  });

  it("writes stdin, and end() closes it", async () => {
    const s = await cluster.exec(ref, { cmd: ["sh", "-c", "cat; echo after-eof"], stdin: true });
    const done = finish(s);
    await s.write(Buffer.from("a\nb\n"));
    await s.end();
    expect(await done).toEqual({ stdout: "a\nb\nafter-eof\n", stderr: "", exitCode: 0 });
  });

  it("runs on a terminal: one raw stream, its size set by resize, Ctrl-D as end()", async () => {
    const s = await cluster.exec(ref, { cmd: ["sh", "-c", "cat; echo to-stderr >&2"], tty: true, stdin: true });
    expect(s.tty).toBe(true);
    const done = finish(s);
    await s.write(Buffer.from("x\n"));
    await s.end();
    // The terminal echoes the line and ends lines with \r\n; stderr is the same terminal.
    expect(await done).toEqual({ stdout: "x\r\nx\r\nto-stderr\r\n", stderr: "", exitCode: 0 });
    const size = await cluster.exec(ref, { cmd: ["sh", "-c", "read x; stty size"], tty: true, stdin: true });
    const sized = finish(size);
    await size.resize(132, 43);
    await size.write(Buffer.from("\n"));
    expect((await sized).stdout).toBe("\r\n43 132\r\n");
  });

  it("runs as the given user, the container's own without one; close() still kills a root exec of a non-root container", async () => {
    const box = await cluster.create("n2", `${run}-nobody`, { image: services.testImage, user: "65534", cmd: ["sleep", "3600"], networkMode: "none", labels: { [testLabel]: run } });
    await cluster.start(box);
    expect((await finish(await cluster.exec(box, { cmd: ["id", "-u"] }))).stdout).toBe("65534\n");
    expect((await finish(await cluster.exec(box, { cmd: ["id", "-u"], user: "0" }))).stdout).toBe("0\n");
    const s = await cluster.exec(box, { cmd: ["sh", "-c", "sleep 3107"], user: "0" });
    const ps = async () => (await finish(await cluster.exec(box, { cmd: ["ps", "-o", "pid,args"] }))).stdout.split("\n").filter((l) => l.includes("sleep 3107"));
    await pollUntil("root sleep runs", async () => (await ps()).length > 0, 10_000, 100);
    await s.close();
    expect(await ps()).toEqual([]);
  });

  it("close() kills the command and what it started, once the engine reports it gone", async () => {
    const s = await cluster.exec(ref, { cmd: ["sh", "-c", "sleep 97531 & sleep 97532; echo never"] });
    const reading = (async () => {
      for await (const _ of s.output) void _;
    })();
    for (let i = 0; (await running("sleep 9753")).length < 2; i++) {
      if (i > 100) throw new Error("the sleeps did not start");
      await new Promise((r) => setTimeout(r, 50));
    }
    await s.close();
    await reading; // ends quietly after close()
    const inspect = (await cluster["engine"]("n2", "test").docker.getExec(s.id).inspect()) as { Running: boolean; ExitCode: number };
    expect(inspect).toMatchObject({ Running: false, ExitCode: 137 });
    expect(await running("sleep 9753")).toEqual([]);
    await expect(s.exitCode).rejects.toThrow(/closed before the command ended/);
    await s.close(); // idempotent
  });

  it("refuses an empty command, a container the engine does not have, one that is not running, and an unknown node", async () => {
    await expect(cluster.exec(ref, { cmd: [] })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(cluster.exec({ node: "n2", id: `${run}-nope` }, { cmd: ["true"] })).rejects.toBeInstanceOf(NotFoundError);
    const stopped = await cluster.create("n2", `${run}-stopped`, { image: services.testImage, cmd: ["true"], networkMode: "none", labels: { [testLabel]: run } });
    await expect(cluster.exec(stopped, { cmd: ["true"] })).rejects.toBeInstanceOf(ConflictError);
    await expect(cluster.exec({ node: "n9", id: "x" }, { cmd: ["true"] })).rejects.toMatchObject({ name: "NotFoundError", resource: "node" });
  });
});
