// `capstan logs NAME[/INSTANCE] [-f] [-n N] [-since 10m] [-t] [-previous]`: a PodGroup's container output as
// the orchestrator streams it (GET /api/podgroups/logs; docs/cli.md). Lines are printed as they
// arrive: a container's stdout to stdout, its stderr to stderr. Every instance, merged, carries an
// `INSTANCE@NODE` prefix; one instance's lines are printed as they are.
//
// Ctrl-C ends a follow cleanly (exit 0): the request is aborted, which ends the server's reads of
// the engines. So does a reader of our output that goes away (`| head`).
import { once } from "node:events";
import { parseSince, prefixOf } from "../../api/orchestrator/log-lines.ts";
import type { LogsQuery } from "../client.ts";
import { clientOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { instanceTarget } from "../instance-arg.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "follow", short: "f", type: "bool", help: "keep printing new lines as they are written, until Ctrl-C (or the containers stop)" },
  { name: "tail", short: "n", type: "int", help: "only the last N lines of each container (default: all)" },
  { name: "since", type: "string", help: "only lines newer than a duration (10m, 1h30m) or since an RFC 3339 time (2026-11-23T01:00:00Z)" },
  { name: "timestamps", short: "t", type: "bool", help: "start each line with its time (RFC 3339, UTC, nanoseconds)" },
  { name: "previous", short: "p", type: "bool", help: "the instance's previous container: the run before the current one (needs NAME/INSTANCE)" },
  ...clientOptionDefs,
];

const help = `${usage("logs", "Prints a PodGroup's container output: one instance's (NAME/INSTANCE), or every instance's merged in time order, each line prefixed INSTANCE@NODE. stdout goes to stdout, stderr to stderr.", defs, "NAME[/INSTANCE]")}
examples:
  capstan logs hello                 every instance, merged
  capstan logs hello/1 -n 20         the last 20 lines of instance 1
  capstan logs hello -f -since 10m   the last 10 minutes, then new lines until Ctrl-C
  capstan logs hello -t 2>/dev/null  stdout only, with times
  capstan logs hello/1 -previous     what instance 1 printed before its last restart or replacement
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [what, ...extra] = args.positionals;
  if (what === undefined) throw new UsageError("which PodGroup: capstan logs NAME[/INSTANCE]");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const { name, instance } = instanceTarget(what);
  const o = args.options;
  const tail = o.tail as number | undefined;
  if (tail !== undefined && tail < 0) throw new UsageError(`-tail: ${tail} is not a number of lines (0 or more)`);
  const since = o.since as string | undefined;
  if (since !== undefined) {
    const parsed = parseSince(since, Date.now());
    if ("error" in parsed) throw new UsageError(`-since: "${since}" ${parsed.error}`);
  }
  const timestamps = o.timestamps === true;
  const previous = o.previous === true;
  if (previous && instance === undefined) throw new UsageError("-previous reads one instance: capstan logs NAME/INSTANCE -previous");
  const q: LogsQuery = { follow: o.follow === true, timestamps, ...(previous && { previous }), ...(instance !== undefined && { instance }), ...(tail !== undefined && { tail }), ...(since !== undefined && { since }) };

  const stop = new AbortController();
  let stopped = false; // Ctrl-C, or our reader went away: an end, not a failure
  const end = () => {
    stopped = true;
    stop.abort(new Error("stopped"));
  };
  const outputGone = (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") end();
  };
  process.once("SIGINT", end);
  process.stdout.on("error", outputGone);
  process.stderr.on("error", outputGone);
  let failures = 0;
  try {
    const client = clientFromOptions(o);
    for await (const entry of client.logs(name, q, stop.signal)) {
      if (entry.error !== undefined) {
        failures++;
        process.stderr.write(`capstan logs: ${prefixOf(entry)}: ${entry.error}\n`);
        continue;
      }
      // Merged lines say where they come from; one instance's only for its second container on.
      const prefix = instance === undefined || entry.container > 0 ? `${prefixOf(entry)} ` : "";
      const out = entry.stream === "stderr" ? process.stderr : process.stdout;
      await write(out, `${prefix}${timestamps && entry.time ? `${entry.time} ` : ""}${entry.line ?? ""}\n`, stop.signal);
    }
  } catch (e) {
    if (!(stopped && stop.signal.aborted)) return reportFailure("logs", e);
  } finally {
    process.removeListener("SIGINT", end);
    process.stdout.removeListener("error", outputGone);
    process.stderr.removeListener("error", outputGone);
  }
  return failures > 0 ? 1 : 0;
}

/** Writes, waiting while the terminal or pipe is full: a slow reader slows the stream, nothing piles up. */
async function write(out: NodeJS.WriteStream, text: string, signal: AbortSignal): Promise<void> {
  if (out.write(text)) return;
  await once(out, "drain", { signal });
}
