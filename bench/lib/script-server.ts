// A bench's own servers as child processes (`node --import tsx <script>`, ready when the script
// prints `listening <port>` on stdout; SIGTERM stops it).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const tsxLoader = import.meta.resolve("tsx");

export interface ScriptServer {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/** The script at `url` (import.meta.resolve of a bench file) in a child process, resolved once it prints its port. */
export function startScriptServer(url: string, args: string[] = [], nodeArgs: string[] = []): Promise<ScriptServer> {
  const path = fileURLToPath(url);
  const script = path.slice(path.lastIndexOf("/") + 1);
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
