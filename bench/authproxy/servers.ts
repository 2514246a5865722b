// The bench's own servers as child processes (upstream.ts, node-proxy.ts: `node --import tsx
// <script>`, ready when it prints `listening <port>`), and the CPU figures /proc gives about the
// machine and about this process's finished children (the load generators).
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const tsxLoader = import.meta.resolve("tsx");

export interface ScriptServer {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/** bench/authproxy/<script> in a child process, resolved once it prints its port. */
export function startScriptServer(script: string, args: string[] = [], nodeArgs: string[] = []): Promise<ScriptServer> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, "--import", tsxLoader, path, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    let out = "";
    let err = "";
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const killed = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(killed);
      }
    };
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`${script} did not start in 30 s: ${out}${err}`));
    }, 30_000);
    child.stderr.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /^listening (\d+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ port: Number(m[1]), pid: child.pid!, stop });
      }
    });
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}): ${err}`));
    });
  });
}

/** Jiffies (1/100 s) the whole machine spent busy and in total so far (/proc/stat, first line). */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await readFile("/proc/stat", "utf8")).split("\n", 1)[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const total = v.slice(0, 8).reduce((s, x) => s + x, 0);
  const idle = v[3]! + v[4]!;
  return { busy: total - idle, total };
}

/**
 * CPU seconds of this process's children that have exited and been waited for (/proc/self/stat
 * cutime + cstime): across one wrk or open-loop run, that run's own CPU.
 */
export async function finishedChildrenCpuSeconds(): Promise<number> {
  const stat = await readFile("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[13]) + Number(fields[14])) / 100;
}
