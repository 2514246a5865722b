// A private nginx for tests and benchmarks that compare Capstan with the real thing (the auth
// proxy's location matching must be exactly nginx's: docs/authproxy.md). Everything it writes lives
// in one mkdtemp dir: nginx.conf, the pid file, the error log and every *_temp_path; it listens
// only on 127.0.0.1 and logs no access.
//
//   const ngx = await startNginx(`location = /x { return 200 "exact\\n"; }`);
//   await fetch(`http://127.0.0.1:${ngx.port}/x`);
//   await ngx.stop();                                  // in afterAll
//
//   const { ok, output } = await nginxTest(`location ~ "^/a{2}$" { return 204; }`);
//
// The caller's text goes inside `server { listen 127.0.0.1:PORT; ... }`; `extraHttp` goes in the
// `http { }` block before the server (upstreams, maps). nginx runs in the foreground as one
// process (`daemon off`, `master_process off`), so the child process is nginx itself and stopping
// it is one signal. As root no `user` directive is needed: without a master there is no worker to
// switch users, and as a non-root user nginx just runs as that user.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../cli/free-port.ts";

/** The nginx binary: $CAPSTAN_NGINX, else `nginx` on PATH (Debian's is /usr/sbin/nginx). */
export const nginxBinary = process.env.CAPSTAN_NGINX ?? "nginx";

export interface NginxOptions {
  /** Text for the `http { }` block, before the server block. */
  extraHttp?: string;
  /** Text for the top level (main context), e.g. `worker_rlimit_nofile 4096;`. */
  extraMain?: string;
  /** error_log level (default "notice"; "info" also logs why a request got 400). */
  errorLogLevel?: "debug" | "info" | "notice" | "warn" | "error";
  /** How long to wait for the port to accept connections (default 10 s). */
  readyTimeoutMs?: number;
}

export interface NginxProcess {
  port: number;
  /** The temp dir: nginx's prefix (-p), holding everything below. */
  dir: string;
  /** Path of the generated nginx.conf. */
  conf: string;
  /** Path of the error log. */
  errorLog: string;
  /** The error log's last 4000 characters (for failure messages). */
  errorLogTail(): Promise<string>;
  /** Stop nginx (SIGQUIT, then SIGKILL after 5 s) and delete the dir. */
  stop(): Promise<void>;
}

/** The whole nginx.conf for one server on 127.0.0.1:port. Paths are absolute, inside `dir`. */
export function nginxConf(dir: string, port: number, serverBlock: string, opts: NginxOptions = {}): string {
  const level = opts.errorLogLevel ?? "notice";
  const p = (name: string) => join(dir, name);
  return [
    "daemon off;",
    "master_process off;",
    "worker_processes 1;",
    `pid ${p("nginx.pid")};`,
    `error_log ${p("error.log")} ${level};`,
    opts.extraMain ?? "",
    "events { worker_connections 1024; }",
    "http {",
    "  access_log off;",
    `  client_body_temp_path ${p("client_body_temp")};`,
    `  proxy_temp_path ${p("proxy_temp")};`,
    `  fastcgi_temp_path ${p("fastcgi_temp")};`,
    `  uwsgi_temp_path ${p("uwsgi_temp")};`,
    `  scgi_temp_path ${p("scgi_temp")};`,
    "  default_type text/plain;",
    opts.extraHttp ?? "",
    "  server {",
    `    listen 127.0.0.1:${port};`,
    "    server_name localhost;",
    serverBlock,
    "  }",
    "}",
    "",
  ].join("\n");
}

async function writeConf(serverBlock: string, opts: NginxOptions, port: number): Promise<{ dir: string; conf: string; errorLog: string }> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-nginx-"));
  const conf = join(dir, "nginx.conf");
  await writeFile(conf, nginxConf(dir, port, serverBlock, opts));
  return { dir, conf, errorLog: join(dir, "error.log") };
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(nginxBinary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, output }));
  });
}

/**
 * `nginx -t -q` on a full config around `serverBlock`. `ok` is nginx's verdict; `output` is what
 * it printed (the `[emerg]` line on failure). The temp dir is removed afterwards.
 */
export async function nginxTest(serverBlock: string, opts: NginxOptions = {}): Promise<{ ok: boolean; output: string }> {
  // The port is never bound by -t; any number makes a valid listen directive.
  const { dir, conf, errorLog } = await writeConf(serverBlock, opts, 9);
  try {
    const { code, output } = await run(["-t", "-q", "-c", conf, "-p", dir, "-e", errorLog]);
    const logged = await readFile(errorLog, "utf8").catch(() => "");
    return { ok: code === 0, output: (output + logged).trim() };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * Start nginx with `serverBlock` inside its one server and wait until the port accepts
 * connections. Fails with the error log when nginx exits or does not listen in time.
 */
export async function startNginx(serverBlock: string, opts: NginxOptions = {}): Promise<NginxProcess> {
  // freePort() releases the port before nginx binds it; another process may take it in between.
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(serverBlock, opts);
    } catch (e) {
      if (attempt >= 3 || !(e instanceof Error) || !e.message.includes("Address already in use")) throw e;
    }
  }
}

async function launch(serverBlock: string, opts: NginxOptions): Promise<NginxProcess> {
  const port = await freePort();
  const { dir, conf, errorLog } = await writeConf(serverBlock, opts, port);
  const tail = async () => (await readFile(errorLog, "utf8").catch(() => "")).slice(-4000);
  let output = "";
  // -e: what nginx logs before the config's error_log takes over (a bad config) goes to our
  // file, not to the build's default path.
  const child: ChildProcess = spawn(nginxBinary, ["-c", conf, "-p", dir, "-e", errorLog], { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (output += c.toString()));
  let spawnError: Error | undefined;
  child.once("error", (e) => (spawnError = e));
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));

  const cleanup = async () => {
    if (child.exitCode === null && child.signalCode === null && !spawnError) {
      // SIGQUIT is nginx's graceful shutdown; SIGKILL if it does not finish.
      child.kill("SIGQUIT");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  const timeoutMs = opts.readyTimeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (spawnError || child.exitCode !== null || child.signalCode !== null) {
      const why = spawnError ? `could not run ${nginxBinary}: ${spawnError.message}` : `nginx exited (${child.exitCode ?? child.signalCode})`;
      const log = `${output}${await tail()}`;
      await cleanup();
      throw new Error(`${why}; config:\n${nginxConf(dir, port, serverBlock, opts)}\nerror log:\n${log}`);
    }
    if (await accepts(port)) break;
    if (Date.now() > deadline) {
      const log = `${output}${await tail()}`;
      await cleanup();
      throw new Error(`nginx did not accept connections on 127.0.0.1:${port} within ${timeoutMs} ms; error log:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }

  return { port, dir, conf, errorLog, errorLogTail: tail, stop: cleanup };
}
