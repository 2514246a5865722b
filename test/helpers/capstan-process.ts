// A real `capstan` server process (up, orchestrator, console, secrets) on a free loopback port, as
// an operator starts it: spawned from cli/bin/capstan.mjs, ready once its "<name> is up" log line
// carries the address the kernel gave port 0.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const capstanBin = fileURLToPath(new URL("../../cli/bin/capstan.mjs", import.meta.url));

export interface CapstanProcess {
  child: ChildProcess;
  url: string;
  exited: Promise<number | null>;
  /** Everything it printed so far (JSON log lines). */
  log(): string;
  /** SIGTERM, then SIGKILL after 10 s; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** `name` is the command ("up" logs "capstan is up"); `-web 127.0.0.1:0` is added. */
export async function startCapstan(name: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<CapstanProcess> {
  const child = spawn(capstanBin, [name, "-web", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CAPSTAN_WEB: "", CAPSTAN_ADMIN_TOKEN: "", CAPSTAN_STORE: "", CAPSTAN_CLUSTER: "", ...env },
  });
  let log = "";
  child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const upName = name === "up" ? "capstan" : name;
  const deadline = Date.now() + 30_000;
  let url = "";
  while (!url && Date.now() < deadline && child.exitCode === null) {
    // Any listen host (127.0.0.1, or 0.0.0.0 for a test of a wildcard listener): it is reached on loopback.
    const m = new RegExp(`"address":\\{"host":"[^"]*","port":(\\d+)\\}[^\\n]*"msg":"${upName} is up"`).exec(log);
    if (m) url = `http://127.0.0.1:${m[1]}`;
    else await new Promise((r) => setTimeout(r, 100));
  }
  if (!url) {
    child.kill("SIGKILL");
    throw new Error(`capstan ${name} did not come up; log:\n${log}`);
  }
  return {
    child,
    url,
    exited,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * Run a `capstan` command that ends by itself (a client command, `check-config`, `generate`):
 * its exit code and what it printed, each stream apart. Killed after `timeoutMs`.
 */
export function runCapstan(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(capstanBin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * A call to a Capstan API that must succeed: its JSON answer. Any status of 300 or more fails the
 * test, naming the call and the answer.
 */
export async function apiCallOk(base: string, token: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(base + path, {
    method,
    headers: { "access-token": token, ...(body !== undefined && { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}
