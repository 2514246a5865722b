// `capstan events [-app A] [-kind K] [-name N] [-since 10m] [-limit N] [-w]`: what the controllers
// recorded (GET /api/events; docs/events.md), newest last, as `kubectl get events` shows it:
// LAST SEEN, TYPE, REASON, OBJECT (kind/name[/instance]), COUNT, MESSAGE. -w keeps printing new
// and repeated events as they are written, until Ctrl-C.
import { once } from "node:events";
import { LineSplitter } from "../../adapters/cluster/ndjson.ts";
import { parseSince } from "../../api/orchestrator/log-lines.ts";
import type { EventRecord } from "../../api/resources/event.ts";
import { clientOptionDefs, targetFromOptions } from "../client-config.ts";
import { reportFailure } from "../failure.ts";
import { HttpClient, query } from "../http-client.ts";
import { ApiError } from "../http-errors.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { jsonAliasDef, outputFormat, outputOptionDef } from "../output-option.ts";
import { table } from "../render.ts";

const defs: OptionDef[] = [
  { name: "app", type: "string", help: "only this app's events" },
  { name: "kind", type: "string", help: "only events of podgroup, dependency or node objects" },
  { name: "name", type: "string", help: "only events of objects of this name" },
  { name: "since", type: "string", help: "only events last seen since a duration ago (10m, 1h30m) or an RFC 3339 time" },
  { name: "limit", type: "int", help: "the newest N (the server's default: 500; at most 5000)" },
  { name: "watch", short: "w", type: "bool", help: "keep printing new events as they are recorded, until Ctrl-C" },
  outputOptionDef(["table", "json"], "the events as the server sends them; one per line with -w"),
  jsonAliasDef,
  ...clientOptionDefs,
];

const help = `${usage("events", "Lists what the controllers recorded: deploys, crashes, restarts, drift, nodes going down, newest last.", defs)}
examples:
  capstan events                       every event you may read
  capstan events -app shop -since 10m  app shop's events of the last 10 minutes
  capstan events -name shop.web -w     one object's events, then new ones until Ctrl-C
  capstan events -o json               the server's records
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  const o = args.options;
  const since = o.since as string | undefined;
  if (since !== undefined && "error" in parseSince(since, Date.now())) throw new UsageError(`-since: "${since}" ${(parseSince(since, Date.now()) as { error: string }).error}`);
  const kind = o.kind as string | undefined;
  if (kind !== undefined && !["podgroup", "dependency", "node"].includes(kind)) throw new UsageError(`-kind: "${kind}" is not podgroup, dependency or node`);
  const limit = o.limit as number | undefined;
  if (limit !== undefined && (limit < 1 || limit > 5000)) throw new UsageError(`-limit: ${limit} is not from 1 to 5000`);
  const watch = o.watch === true;
  const json = outputFormat(o, ["table", "json"]) === "json";
  const params = query({
    app: (o.app as string | undefined) || undefined,
    kind,
    name: (o.name as string | undefined) || undefined,
    since,
    limit: limit?.toString(),
    watch: watch ? "true" : undefined,
  });

  const stop = new AbortController();
  let stopped = false;
  const end = () => {
    stopped = true;
    stop.abort(new Error("stopped"));
  };
  const outputGone = (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") end();
  };
  process.once("SIGINT", end);
  process.stdout.on("error", outputGone);
  try {
    const target = targetFromOptions(o);
    const http = new HttpClient({ server: target.server, component: "orchestrator", requestTimeoutMs: o["request-timeout"] as number, token: target.token, ca: target.ca });
    if (!watch) {
      const answer = await http.request("GET", `/api/events?${params}`);
      if (!Array.isArray(answer)) throw new ApiError(200, "BadAnswer", "GET /api/events answered something other than a list");
      const list = answer as EventRecord[];
      process.stdout.write(json ? `${JSON.stringify(list, null, 2)}\n` : renderEvents(list, Date.now()));
      return 0;
    }
    const body = await http.stream(`/api/events?${params}`, "application/x-ndjson", stop.signal);
    if (!json) await write(`${watchLine(["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"])}\n`, stop.signal);
    const lines = new LineSplitter(1 << 20);
    for await (const chunk of body) {
      for (const text of lines.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
        let e: EventRecord;
        try {
          e = JSON.parse(text) as EventRecord;
        } catch {
          throw new ApiError(200, "BadAnswer", `GET /api/events answered a line that is not JSON: ${text.slice(0, 200)}`);
        }
        await write(json ? `${text}\n` : `${watchLine(row(e, Date.now()))}\n`, stop.signal);
      }
    }
    return 0;
  } catch (e) {
    if (stopped && stop.signal.aborted) return 0;
    return reportFailure("events", e);
  } finally {
    process.removeListener("SIGINT", end);
    process.stdout.removeListener("error", outputGone);
  }
}

/** The table of `events`, or a line saying there are none. */
export function renderEvents(events: EventRecord[], nowMs: number): string {
  if (events.length === 0) return "no events\n";
  return table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"], events.map((e) => row(e, nowMs)));
}

function row(e: EventRecord, nowMs: number): string[] {
  return [age(Date.parse(e.lastTime), nowMs), e.type, e.reason, objectOf(e), String(e.count), e.message.replace(/\r?\n/g, " ")];
}

/** kind/name, or kind/name/instance for an event about one instance. */
export function objectOf(e: Pick<EventRecord, "kind" | "name" | "instance">): string {
  return `${e.kind}/${e.name}${e.instance !== undefined ? `/${e.instance}` : ""}`;
}

/** 5s, 3m, 2h, 4d: how long ago, as kubectl prints it. */
export function age(thenMs: number, nowMs: number): string {
  if (Number.isNaN(thenMs)) return "?";
  const s = Math.max(0, Math.floor((nowMs - thenMs) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** Columns of a watch, padded to fixed widths (lines come one at a time; a table cannot be measured). */
function watchLine(cells: string[]): string {
  const widths = [9, 7, 20, 40, 5];
  return cells.map((c, i) => (i < widths.length ? c.padEnd(widths[i]!) : c)).join("  ").trimEnd();
}

/** Writes, waiting while the terminal or pipe is full. */
async function write(text: string, signal: AbortSignal): Promise<void> {
  if (process.stdout.write(text)) return;
  await once(process.stdout, "drain", { signal });
}
