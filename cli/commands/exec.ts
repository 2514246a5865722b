// `capstan exec NAME[/INSTANCE] [-i] [-t] -- CMD [ARG...]`: a command run in a PodGroup instance's
// container, over the orchestrator's WebSocket (GET /api/podgroups/exec; docs/cli.md). Its stdout
// goes to stdout and its stderr to stderr; the exit code is the command's.
//
// -i sends standard input, and its end closes the command's stdin. -t runs the command on a
// terminal: with -i and a terminal on our side, ours is put in raw mode (every key goes to the
// command, Ctrl-C included), the size is sent at the start and whenever the window changes, and the
// terminal is restored at the end. Without a terminal of ours, -t is dropped with a warning (as
// kubectl does). Ctrl-C without a terminal closes the session, which ends the command (exit 130).
import { WebSocket, type RawData } from "ws";
import { channel, frame, parseServerFrame, resizeFrame, type ExecEnd } from "../../api/orchestrator/exec-frames.ts";
import { clientOptionDefs, targetFromOptions } from "../client-config.ts";
import { reportFailure, CommandFailure } from "../failure.ts";
import { ApiError, certificateError, ServerUnreachableError, type CaBundle } from "../http-errors.ts";
import { instanceTarget } from "../instance-arg.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "stdin", short: "i", type: "bool", help: "pass standard input to the command; its end closes the command's stdin" },
  { name: "tty", short: "t", type: "bool", help: "run the command on a terminal (with -i: raw mode, and the remote size follows this terminal's)" },
  ...clientOptionDefs,
];

const help = `${usage("exec", "Runs a command in a PodGroup instance's container (its first container) and exits with the command's exit code. NAME alone is the group's only instance.", defs, "NAME[/INSTANCE] -- CMD [ARG...]")}
examples:
  capstan exec hello -- ls -l /              one command, its output
  capstan exec hello/1 -it -- sh             an interactive shell in instance 1
  capstan exec hello -i -- sh -c 'cat > /tmp/x' < file
`;

export async function run(argv: string[]): Promise<number> {
  // Everything after `--` is the command, untouched; before it, -it and -ti are -i -t.
  const dash = argv.indexOf("--");
  const before = (dash < 0 ? argv : argv.slice(0, dash)).flatMap((a) => (a === "-it" || a === "-ti" ? ["-i", "-t"] : [a]));
  const args = parseArgs(before, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [what, ...rest] = args.positionals;
  if (what === undefined) throw new UsageError("which PodGroup: capstan exec NAME[/INSTANCE] -- CMD [ARG...]");
  const cmd = dash < 0 ? rest : [...rest, ...argv.slice(dash + 1)];
  if (cmd.length === 0 || cmd[0] === "") throw new UsageError("which command: capstan exec NAME[/INSTANCE] -- CMD [ARG...]");
  const { name, instance } = instanceTarget(what);
  const o = args.options;
  const stdin = o.stdin === true;
  let tty = o.tty === true;
  if (tty && !(process.stdin.isTTY && process.stdout.isTTY)) {
    process.stderr.write("capstan exec: -t: standard input or output is not a terminal; running the command without one\n");
    tty = false;
  }
  try {
    const t = targetFromOptions(o);
    const session = new Session(t.server, t.token, t.ca, (o["request-timeout"] as number) ?? 10_000);
    return await session.run({ name, instance, cmd, tty, stdin });
  } catch (e) {
    return reportFailure("exec", e);
  }
}

interface Request {
  name: string;
  instance: number | undefined;
  cmd: string[];
  tty: boolean;
  stdin: boolean;
}

class Session {
  constructor(
    private readonly server: string,
    private readonly token: string | undefined,
    private readonly ca: CaBundle | undefined,
    private readonly timeoutMs: number,
  ) {}

  run(r: Request): Promise<number> {
    const params = new URLSearchParams({ name: r.name });
    if (r.instance !== undefined) params.set("instance", String(r.instance));
    for (const a of r.cmd) params.append("cmd", a);
    params.set("tty", String(r.tty));
    params.set("stdin", String(r.stdin));
    const url = `${this.server.replace(/^http/, "ws")}/api/podgroups/exec?${params.toString()}`;
    const ws = new WebSocket(url, {
      headers: this.token === undefined ? {} : { "access-token": this.token },
      ...(this.ca !== undefined && { ca: this.ca.pem }),
      // The orchestrator answers once it found the instance; the engine's exec starts after that.
      handshakeTimeout: this.timeoutMs,
      followRedirects: false,
      perMessageDeflate: false,
      maxPayload: 16 << 20,
    });
    return new Promise<number>((resolve, reject) => {
      let opened = false;
      let end: ExecEnd | undefined;
      let interrupted = false;
      const raw = r.tty && r.stdin && process.stdin.isTTY;
      const cleanups: (() => void)[] = [];
      const cleanup = () => {
        for (const f of cleanups.splice(0).reverse()) f();
      };

      ws.on("unexpected-response", (req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => {
          req.destroy();
          reject(apiErrorOf(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")));
        });
        res.on("error", () => reject(new ServerUnreachableError(this.server, "the answer broke off")));
      });
      ws.on("error", (err) => {
        if (opened) return; // the close that follows says it
        reject(certificateError({ cause: err }, this.server, "orchestrator", this.ca) ?? new ServerUnreachableError(this.server, reasonOf(err, this.timeoutMs)));
      });

      ws.on("open", () => {
        opened = true;
        if (r.tty && process.stdout.isTTY) {
          const size = () => {
            if (ws.readyState === ws.OPEN && process.stdout.columns > 0 && process.stdout.rows > 0) ws.send(resizeFrame(process.stdout.columns, process.stdout.rows));
          };
          size();
          process.on("SIGWINCH", size);
          cleanups.push(() => process.removeListener("SIGWINCH", size));
        }
        if (raw) {
          // Restored however the command ends: by the session's end, or by the process exiting.
          const restore = () => process.stdin.isTTY && process.stdin.setRawMode(false);
          process.stdin.setRawMode(true);
          process.once("exit", restore);
          cleanups.push(() => {
            process.removeListener("exit", restore);
            restore();
          });
        } else {
          // Without a terminal of ours, Ctrl-C ends the session (and so the command).
          const onSigint = () => {
            interrupted = true;
            ws.close(1000);
          };
          process.on("SIGINT", onSigint);
          cleanups.push(() => process.removeListener("SIGINT", onSigint));
        }
        if (r.stdin) this.pipeStdin(ws, cleanups);
      });

      ws.on("message", (data: RawData, isBinary: boolean) => {
        const message = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
        const f = isBinary ? parseServerFrame(message) : { error: "the server sent a text frame" };
        if ("error" in f) {
          end ??= { error: `protocol error: ${f.error}` };
          ws.close(1002);
          return;
        }
        if (f.kind === "end") {
          end ??= f.end;
          return;
        }
        const out = f.kind === "stderr" ? process.stderr : process.stdout;
        if (!out.write(f.data)) {
          ws.pause();
          out.once("drain", () => ws.resume());
        }
      });

      ws.on("close", (code, reason) => {
        cleanup();
        if (!opened) return; // the error or the unexpected response settles it
        if (end !== undefined && "exitCode" in end) resolve(end.exitCode);
        else if (end !== undefined) reject(new CommandFailure(end.error));
        else if (interrupted) resolve(130);
        else reject(new CommandFailure(`the connection to the orchestrator closed before the command ended (WebSocket code ${code}${reason.length > 0 ? `: ${reason.toString("utf8")}` : ""})`));
      });
    });
  }

  /** Standard input as channel 0, its end as 255; read no faster than it goes out. */
  private pipeStdin(ws: WebSocket, cleanups: (() => void)[]): void {
    const input = process.stdin;
    let paused = false;
    const onData = (chunk: Buffer) => {
      if (ws.readyState !== ws.OPEN) return;
      ws.send(frame(channel.stdin, chunk), () => {
        if (paused && ws.bufferedAmount < 256 << 10) {
          paused = false;
          input.resume();
        }
      });
      if (ws.bufferedAmount >= 1 << 20) {
        paused = true;
        input.pause();
      }
    };
    const onEnd = () => {
      if (ws.readyState === ws.OPEN) ws.send(frame(channel.stdinEnd));
    };
    input.on("data", onData);
    input.once("end", onEnd);
    input.on("error", onEnd);
    cleanups.push(() => {
      input.removeListener("data", onData);
      input.removeListener("end", onEnd);
      input.removeListener("error", onEnd);
      // Nothing more is read: the process can end even while a terminal or pipe stays open.
      input.destroy();
    });
  }
}

/** The ApiError of a refused handshake: the code, message, reason and details of its JSON body. */
function apiErrorOf(status: number, text: string): ApiError {
  let body: { code?: unknown; message?: unknown; reason?: unknown; details?: unknown } = {};
  try {
    body = (JSON.parse(text) ?? {}) as typeof body;
  } catch {
    // not JSON: the text is the message
  }
  const details = Array.isArray(body.details)
    ? (body.details as { path?: unknown; message?: unknown }[]).map((d) => ({ path: typeof d.path === "string" ? d.path : "", message: typeof d.message === "string" ? d.message : JSON.stringify(d) }))
    : undefined;
  return new ApiError(
    status,
    typeof body.code === "string" ? body.code : `HTTP ${status}`,
    typeof body.message === "string" ? body.message : text.trim().slice(0, 500) || `HTTP ${status}`,
    typeof body.reason === "string" ? body.reason : undefined,
    details,
  );
}

function reasonOf(err: Error & { code?: string }, timeoutMs: number): string {
  if (/timeout/i.test(err.message) && err.code === undefined) return `no answer within ${timeoutMs} ms`;
  return err.code ?? err.message;
}
