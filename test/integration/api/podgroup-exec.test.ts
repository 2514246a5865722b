// GET /api/podgroups/exec against a real `capstan up` (embedded store, the real engines, the token
// gate, the audit trail), over real WebSockets: output, stdout and stderr apart, exit codes, stdin
// and its end, a terminal and its size, who may exec (a permission of its own), the audit line of
// every authenticated attempt, the Origin check, and a client that vanishes mid-command leaving no
// process behind. Then `capstan exec` itself, as a user runs it.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { upgradeWebSocket } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { DockerCluster } from "../../../adapters/cluster/index.ts";
import { generateToken } from "../../../api/console/index.ts";
import { channel, endFrame, frame, parseServerFrame, resizeFrame, type ExecEnd } from "../../../api/orchestrator/exec-frames.ts";
import { Manager } from "../../../runtime/manager.ts";
import { apiCallOk, capstanBin, runCapstan, startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { makePki } from "../../helpers/certs.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const run = uniqueName("ex").replace(/[^a-z0-9]/g, "");
const app = `${run}a`;
const otherApp = `${run}b`;
const one = `${app}.one`;
const two = `${app}.two`;
const admin = generateToken().token;
const tokens = { maintainer: "", viewer: "", other: "" };
const alice = `alice-${run}@example.com`;

let up: CapstanProcess;
let dir: string;
let home: string;

type Query = Record<string, string | string[] | undefined>;

function url(q: Query): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) for (const x of v === undefined ? [] : Array.isArray(v) ? v : [v]) params.append(k, x);
  return `${up.url.replace(/^http/, "ws")}/api/podgroups/exec?${params.toString()}`;
}

interface Session {
  ws: WebSocket;
  stdout: string;
  stderr: string;
  end: ExecEnd | undefined;
  /** The close code, once closed. */
  closed: Promise<number>;
  opened: Promise<void>;
}

/** Opens an exec WebSocket and collects what comes back. */
function open(q: Query, token: string = admin, headers: Record<string, string> = {}): Session {
  const ws = new WebSocket(url(q), { headers: { "access-token": token, ...headers } });
  const s: Session = { ws, stdout: "", stderr: "", end: undefined, closed: Promise.resolve(0), opened: Promise.resolve() };
  s.opened = new Promise((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
    ws.once("unexpected-response", (_req, res) => reject(new Error(`unexpected answer ${res.statusCode}`)));
  });
  s.opened.catch(() => undefined);
  s.closed = new Promise((resolve) => ws.once("close", (code) => resolve(code)));
  ws.on("message", (data: Buffer) => {
    const f = parseServerFrame(data);
    if ("error" in f) throw new Error(f.error);
    if (f.kind === "stdout") s.stdout += f.data.toString("utf8");
    else if (f.kind === "stderr") s.stderr += f.data.toString("utf8");
    else if (f.kind === "end") s.end = f.end;
  });
  return s;
}

/** Runs a command to its end: its output, how it ended, and the close code. */
async function execute(q: Query, send: (ws: WebSocket) => void = () => undefined, token: string = admin): Promise<{ stdout: string; stderr: string; end: ExecEnd | undefined; code: number }> {
  const s = open(q, token);
  await s.opened;
  send(s.ws);
  const code = await s.closed;
  return { stdout: s.stdout, stderr: s.stderr, end: s.end, code };
}

/** A handshake the server refuses: its status and JSON body. */
function refused(q: Query, token: string | null = admin, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> & { details?: { path: string }[] } }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url(q), { headers: { ...(token !== null && { "access-token": token }), ...headers } });
    ws.once("open", () => {
      ws.terminate();
      reject(new Error("the handshake was accepted"));
    });
    ws.once("error", reject);
    ws.once("unexpected-response", (req, res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
      });
    });
  });
}

const adminCall = (method: string, path: string, body?: unknown) => apiCallOk(up.url, admin, method, path, body);

const auditLines = () =>
  up
    .log()
    .split("\n")
    .filter((l) => l.includes('"audit":true'))
    .map((l) => JSON.parse(l) as Record<string, unknown> & { object?: string; path?: string });

/** Processes in instance 0 of `one` whose command line contains `text`, as a second exec sees them. */
async function processesWith(text: string): Promise<string[]> {
  const r = await execute({ name: one, cmd: ["ps", "-o", "pid,args"] });
  expect(r.end).toEqual({ exitCode: 0 });
  return r.stdout.split("\n").filter((l) => l.includes(text));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-exec-"));
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-update-wait", "1s", "-refresh-interval", "2s"], { CAPSTAN_ADMIN_TOKEN: admin });
  await adminCall("POST", "/api/v1/apps", { appname: app, maintainers: [alice] });
  await adminCall("POST", "/api/v1/apps", { appname: otherApp, maintainers: [`bob-${run}@example.com`] });
  tokens.maintainer = (await adminCall("POST", "/api/v1/tokens", { user: alice, role: "user" })).token as string;
  tokens.viewer = (await adminCall("POST", "/api/v1/tokens", { user: `carol-${run}@example.com`, role: "viewer", apps: [app] })).token as string;
  tokens.other = (await adminCall("POST", "/api/v1/tokens", { user: `bob-${run}@example.com`, role: "user" })).token as string;
  const idle = ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"];
  for (const [name, numInstances] of [
    [one, 1],
    [two, 2],
  ] as const) {
    await adminCall("POST", "/api/podgroups", {
      name,
      namespace: app,
      numInstances,
      restartPolicy: "always",
      pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: idle }] },
    });
  }
  for (const [name, n] of [
    [one, 1],
    [two, 2],
  ] as const) {
    await pollUntil(
      `${name} to run ${n} instance(s)`,
      async () => {
        const g = (await adminCall("GET", `/api/podgroups?name=${name}`)) as { pods?: { state: string; containers: { id: string }[] }[] };
        return g.pods?.length === n && g.pods.every((p) => p.state === "running" && p.containers.some((c) => c.id !== ""));
      },
      60_000,
      250,
    );
  }
}, 180_000);

afterAll(async () => {
  await up?.stop();
  for (const name of [one, two]) {
    for (const c of await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } })) {
      await cluster.remove(c, { force: true, volumes: true });
    }
  }
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe("GET /api/podgroups/exec", () => {
  it("runs a command in the group's only instance: its output, then the end, then close 1000", async () => {
    expect(await execute({ name: one, cmd: ["echo", "hello", "world"] })).toEqual({ stdout: "hello world\n", stderr: "", end: { exitCode: 0 }, code: 1000 });
  });

  it("keeps stdout and stderr apart without a TTY", async () => {
    const r = await execute({ name: one, cmd: ["sh", "-c", "echo out-1; echo err-1 >&2; echo out-2"] });
    expect([r.stdout, r.stderr, r.end]).toEqual(["out-1\nout-2\n", "err-1\n", { exitCode: 0 }]);
  });

  it("says the command's exit code", async () => {
    expect((await execute({ name: one, cmd: ["sh", "-c", "exit 3"] })).end).toEqual({ exitCode: 3 });
  });

  it("passes stdin to the command, and 255 closes it (EOF)", async () => {
    const secret = `stdin-secret-${run}`;
    const r = await execute({ name: one, cmd: ["cat"], stdin: "true" }, (ws) => {
      ws.send(frame(channel.stdin, "line 1\n"));
      ws.send(frame(channel.stdin, `${secret}\n`));
      ws.send(frame(channel.stdinEnd));
    });
    expect(r).toEqual({ stdout: `line 1\n${secret}\n`, stderr: "", end: { exitCode: 0 }, code: 1000 });
    expect(up.log()).not.toContain(secret); // stdin is never written down
  });

  it("runs on a terminal: one raw stream, and resize sets the size stty sees", async () => {
    const s = open({ name: one, cmd: ["sh", "-c", "read x; stty size; echo to-stderr >&2; read x; stty size"], tty: "true", stdin: "true" });
    await s.opened;
    // Each resize goes before the line that lets stty run, and the next waits for its answer.
    s.ws.send(resizeFrame(100, 30));
    s.ws.send(frame(channel.stdin, "\n"));
    await pollUntil("the first stty size", async () => s.stdout.includes("to-stderr"), 10_000, 20);
    s.ws.send(resizeFrame(80, 24));
    s.ws.send(frame(channel.stdin, "\n"));
    expect(await s.closed).toBe(1000);
    expect(s.end).toEqual({ exitCode: 0 });
    expect(s.stderr).toBe("");
    // The terminal echoes the typed line ends, and ends its own lines with \r\n.
    expect(s.stdout).toBe("\r\n30 100\r\nto-stderr\r\n\r\n24 80\r\n");
  });

  it("chooses an instance: instance=N, the only one by default, else a 400 naming instance", async () => {
    expect((await execute({ name: two, instance: "1", cmd: ["true"] })).end).toEqual({ exitCode: 0 });
    const choose = await refused({ name: two, cmd: ["true"] });
    expect(choose.status).toBe(400);
    expect(choose.body.details?.map((d) => d.path)).toEqual(["instance"]);
    expect(choose.body.message).toContain("has 2 instances (1, 2): choose one");
    const unknown = await refused({ name: two, instance: "7", cmd: ["true"] });
    expect([unknown.status, unknown.body.message]).toEqual([404, `podgroup ${two} has no instance 7 (instances: 1, 2)`]);
    const zero = await refused({ name: two, instance: "0", cmd: ["true"] });
    expect([zero.status, zero.body.details?.map((d) => d.path)]).toEqual([400, ["instance"]]);
    expect(JSON.stringify(zero.body)).toContain("instances are numbered from 1");
  });

  it.each([
    ["cmd", { name: one }],
    ["cmd", { name: one, cmd: "" }],
    ["tty", { name: one, cmd: "true", tty: "yes" }],
    ["stdin", { name: one, cmd: "true", stdin: "1" }],
    ["name", { name: "Not_A_Name", cmd: "true" }],
  ])("answers 400 naming %s for %j, as JSON before any upgrade", async (field, q) => {
    const a = await refused(q);
    expect(a.status).toBe(400);
    expect(a.body.code).toBe("BadRequest");
    expect(a.body.details?.map((d) => d.path)).toEqual([field]);
  });

  it("answers 404 for an unknown group, and 400 naming Upgrade for a request that is no WebSocket", async () => {
    const a = await refused({ name: `${app}.nope`, cmd: "true" });
    expect([a.status, a.body]).toEqual([404, { code: "NotFound", message: `podgroup ${app}.nope not found` }]);
    const plain = await fetch(`${up.url}/api/podgroups/exec?name=${one}&cmd=true`, { headers: { "access-token": admin } });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { details: { path: string }[] }).details.map((d) => d.path)).toEqual(["Upgrade"]);
  });

  it("refuses a viewer and a maintainer of another app with 403 (exec is not read); no token is 401 and leaves no audit line", async () => {
    const marker = `refused-${run}`;
    const viewer = await refused({ name: one, cmd: ["echo", marker] }, tokens.viewer);
    expect(viewer.status).toBe(403);
    expect(viewer.body).toMatchObject({ code: "Forbidden", missing: `exec on app ${app}` });
    expect(viewer.body.message).toContain(`may not exec into app ${app}`);
    const other = await refused({ name: one, cmd: ["echo", marker] }, tokens.other);
    expect([other.status, other.body.missing]).toEqual([403, `exec on app ${app}`]);

    const unauthenticated = `unauthenticated-${run}`;
    const none = await refused({ name: one, cmd: ["echo", unauthenticated] }, null);
    expect(none.status).toBe(401);
    expect(none.body.code).toBe("Unauthorized");
    const bad = await refused({ name: one, cmd: ["echo", unauthenticated] }, "cst_000000000000_nope");
    expect(bad.status).toBe(401);

    // The two refusals were audited as denied (the audit line follows the answer).
    await pollUntil("the audit lines of the refusals", async () => auditLines().filter((l) => l.object?.includes(marker)).length === 2, 5_000);
    const denied = auditLines().filter((l) => l.object?.includes(marker));
    expect(denied.map((l) => [l.role, l.status, l.outcome])).toEqual([
      ["viewer", 403, "denied"],
      ["user", 403, "denied"],
    ]);
    expect(up.log()).not.toContain(unauthenticated);
  });

  it("writes an audit line for an allowed exec: who, the instance and the command", async () => {
    const marker = `audited-${run}`;
    const r = await execute({ name: one, cmd: ["echo", marker], tty: "false" }, () => undefined, tokens.maintainer);
    expect(r.end).toEqual({ exitCode: 0 });
    const line = await pollUntil("the audit line", async () => auditLines().find((l) => l.object?.includes(marker)), 5_000);
    expect(line).toMatchObject({
      user: alice,
      role: "user",
      method: "GET",
      path: "/api/podgroups/exec",
      object: `podgroup/${one}/1 exec ["echo","${marker}"]`,
      status: 200,
      outcome: "allowed",
    });
  });

  it("refuses a cross-site handshake (an Origin of another host) with 403, and takes its own origin", async () => {
    const marker = `cross-site-${run}`;
    const cross = await refused({ name: one, cmd: ["echo", marker] }, admin, { origin: "https://attacker.example" });
    expect(cross.status).toBe(403);
    expect(cross.body).toMatchObject({ code: "Forbidden", missing: "a same-origin request" });
    const sameOrigin = open({ name: one, cmd: ["echo", "same"] }, admin, { origin: up.url });
    await sameOrigin.opened;
    expect(await sameOrigin.closed).toBe(1000);
    expect([sameOrigin.stdout, sameOrigin.end]).toEqual(["same\n", { exitCode: 0 }]);
  });

  it.each([
    ["without a TTY", "false", "98761"],
    ["on a terminal", "true", "98762"],
  ])("ends the command when the client vanishes mid-command (%s): nothing is left running", async (_what, tty, seconds) => {
    const s = open({ name: one, cmd: ["sh", "-c", `sleep ${seconds}; echo never`], tty, stdin: "true" });
    await s.opened;
    await pollUntil(`sleep ${seconds} to run`, async () => (await processesWith(`sleep ${seconds}`)).length > 0, 10_000);
    s.ws.terminate(); // no close frame: the connection just goes
    await pollUntil(`sleep ${seconds} and its shell to be gone`, async () => (await processesWith(seconds)).length === 0, 20_000, 200);
  });

  it("ends a session, and a log follow, once the caller's token is revoked (within the 2 s bound)", async () => {
    const made = await adminCall("POST", "/api/v1/tokens", { user: alice, role: "user" });
    const token = made.token as string;
    const s = open({ name: one, cmd: ["sleep", "1000"] }, token);
    await s.opened;
    const follow = await fetch(`${up.url}/api/podgroups/logs?name=${one}&follow=true`, { headers: { "access-token": token } });
    expect(follow.status).toBe(200);
    const followEnded = (async () => {
      for await (const _ of follow.body!) {
        // read until the server ends the answer
      }
      return true;
    })();
    await adminCall("DELETE", `/api/v1/tokens/${made.id as string}`);
    expect(await s.closed).toBe(1000);
    expect(s.end).toEqual({ error: "the caller's token or grants no longer allow exec into this app" });
    expect(await followEnded).toBe(true);
    await pollUntil("no sleep 1000 left in the container", async () => (await processesWith("sleep 1000")).length === 0, 20_000, 200);
  }, 60_000);

  it("ends with an error on channel 3 for a protocol violation", async () => {
    const r = await execute({ name: one, cmd: ["cat"], stdin: "true" }, (ws) => ws.send(frame(7, "x")));
    expect(r.end).toEqual({ error: "channel 7 is not one a client sends (0 stdin, 4 resize, 255 stdin closed)" });
    expect(r.code).toBe(1000);
    expect(endFrame({ exitCode: 0 })[0]).toBe(channel.end);
  });
});

describe("capstan exec", () => {
  const env = () => ({ HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: tokens.maintainer, CAPSTAN_WEB: "" });

  it("prints the command's output and exits with its exit code", async () => {
    expect(await runCapstan(["exec", one, "--", "sh", "-c", "echo out; echo err >&2; exit 7"], env())).toEqual({ code: 7, stdout: "out\n", stderr: "err\n" });
    expect(await runCapstan(["exec", `${two}/1`, "--", "echo", "-n", "instance one"], env())).toEqual({ code: 0, stdout: "instance one", stderr: "" });
  });

  it("-i pipes standard input to the command, and its end closes the command's stdin", async () => {
    const child = spawn(capstanBin, ["exec", "-i", one, "--", "sh", "-c", "cat; echo done >&2"], { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env() } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    child.stdin.write("first line\n");
    child.stdin.end("second line\n");
    expect(await exited).toBe(0);
    expect([stdout, stderr]).toEqual(["first line\nsecond line\n", "done\n"]);
  });

  it("-it on a terminal: raw mode, the terminal's size, every key to the command, the terminal restored", async () => {
    // util-linux `script` gives the command a terminal of its own, 90x33, and feeds it our input.
    const inner = `stty cols 90 rows 33; ${capstanBin} exec -it ${one} -- sh -c 'read x; stty size; exit 4'; echo "exit=$? $(stty -a | grep -o -- '-\\?icanon' | head -1)"`;
    const child = spawn("script", ["-q", "-e", "-c", inner, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env() } });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await pollUntil("capstan exec to start the command", async () => (await processesWith("read x; stty size")).length > 0, 20_000, 200);
      child.stdin.write("\r"); // Enter, as a key: in raw mode it reaches the command's terminal as is
      expect(await exited).toBe(0);
      expect(out).toContain("33 90");
      // The command's exit code came back, and the terminal is canonical again (icanon, not -icanon).
      expect(out).toMatch(/exit=4 icanon/);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  it("says why it is refused, with exit code 1; -t without a terminal is dropped with a warning", async () => {
    const viewer = await runCapstan(["exec", one, "--", "true"], { ...env(), CAPSTAN_TOKEN: tokens.viewer });
    expect(viewer.code).toBe(1);
    expect(viewer.stderr).toMatch(new RegExp(`^capstan exec: Forbidden: carol-${run}@example.com \\(role viewer\\) may not exec into app ${app}\\n$`));
    const choose = await runCapstan(["exec", two, "--", "true"], env());
    expect(choose.code).toBe(1);
    expect(choose.stderr).toContain("instance: podgroup");
    const tty = await runCapstan(["exec", "-t", one, "--", "echo", "ok"], env());
    expect(tty).toEqual({ code: 0, stdout: "ok\n", stderr: "capstan exec: -t: standard input or output is not a terminal; running the command without one\n" });
    const usage = await runCapstan(["exec", one], env());
    expect(usage.code).toBe(2);
  });
});

describe("capstan exec over HTTPS", () => {
  it("trusts the CA of -ca, sends the token, and refuses a server it cannot verify", async () => {
    // A stand-in orchestrator on TLS: it answers one exec by the protocol, echoing what it was asked.
    const pki = await makePki();
    const issued = await pki.issue("server", { ip: ["127.0.0.1"] });
    const manager = new Manager({ name: "tls-exec", http: { port: 0 }, tls: { cert: readFileSync(issued.cert, "utf8"), key: readFileSync(issued.key, "utf8") } });
    manager.app.get("/api/podgroups/exec", (c) => {
      const asked = `${c.req.header("access-token")} ${c.req.query("name")} ${c.req.query("instance")} ${JSON.stringify(c.req.queries("cmd"))} ${c.req.query("stdin")}\n`;
      return upgradeWebSocket(c, {
        onOpen: (_evt, ws) => {
          ws.send(new Uint8Array(frame(channel.stdout, asked)));
          ws.send(new Uint8Array(endFrame({ exitCode: 5 })));
          ws.close(1000);
        },
      });
    });
    await manager.start();
    try {
      const server = `https://127.0.0.1:${manager.address()!.port}`;
      const env = { HOME: home, CAPSTAN_SERVER: server, CAPSTAN_TOKEN: "cst_0123456789ab_tls", CAPSTAN_WEB: "" };
      const ok = await runCapstan(["exec", "-ca", pki.ca, "web/2", "--", "sh", "-c", "a b"], env);
      expect(ok).toEqual({ code: 5, stdout: 'cst_0123456789ab_tls web 2 ["sh","-c","a b"] false\n', stderr: "" });
      const untrusted = await runCapstan(["exec", "web", "--", "true"], env);
      expect(untrusted.code).toBe(1);
      expect(untrusted.stderr).toMatch(/^capstan exec: cannot verify the orchestrator at https:\/\/127\.0\.0\.1:\d+: certificate signed by unknown authority/);
    } finally {
      await manager.stop();
      await pki.remove();
    }
  });
});
