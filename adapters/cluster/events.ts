// Watching containers across engines: per node, the engine's event stream plus a relist after
// every (re)connect (docs/cluster.md, "Events and relist"). Docker's event stream is a hint channel, not
// a log: it ends silently when the engine restarts, and `since` replays only a bounded in-memory
// history (and nothing from before a restart). So a watcher never trusts the stream to be complete:
//
//   connect (bounded by connectTimeoutMs) -> list the node's containers (the relist) -> emit
//   {type:"node", state:"ready"} on a state change -> emit {type:"relist"} -> deliver the events
//   that arrived meanwhile, then live ones -> stream ends, breaks or the relist fails -> wait a
//   jittered exponential back-off -> connect again.
//
// Invariant: a consumer receives a relist of a node after every (re)connect and before any event
// of that connection, so anything that changed while the stream was down shows in the relist, and
// every event delivered after the relist happened after the stream was opened (just before the
// relist was read): at worst it repeats what the relist already shows, never anything older. That
// is why the stream is opened without `since`: its replay of older events would arrive after the
// relist and roll a consumer's state back (a replayed `start` of a container the relist showed as
// exited), and the relist already covers the gap it would fill.
import type { Readable } from "node:stream";
import { Backoff, type BackoffOptions } from "../../runtime/backoff.ts";
import { realClock, type Clock } from "../../runtime/clock.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type {
  ClusterEvent,
  ContainerEvent,
  ContainerSummary,
  EventFilters,
  EventHandler,
  NodeState,
  Subscription,
} from "./cluster.ts";
import { LineSplitter } from "./ndjson.ts";

/** What a watcher needs from one engine. */
export interface EventSource {
  readonly node: string;
  /** Opens the container event stream from now on (no replay); resolves once the engine answered. */
  open(query: { filters: EventFilters }, signal: AbortSignal): Promise<Readable>;
  /** The node's containers now, in every state, narrowed by the label filter. */
  list(label: string[] | undefined, signal: AbortSignal): Promise<ContainerSummary[]>;
}

export interface EventStreamOptions {
  /** Bound on opening a stream (until the engine answers), ms. Default 5000. */
  connectTimeoutMs?: number;
  /** Reconnect back-off. Default 200 ms doubling to 10 s, jittered, reset after 30 s without failure. */
  backoff?: BackoffOptions;
  /** Longest event line accepted, bytes. Default 1 MiB. */
  maxLineBytes?: number;
  clock?: Clock;
  logger?: Logger;
}

export const defaultEventBackoff = { initialMs: 200, maxMs: 10_000, factor: 2, jitter: 1, resetAfterMs: 30_000 };

/** Starts one watcher per source; they run until the subscription is cancelled. */
export function watchEvents(
  sources: EventSource[],
  handler: EventHandler,
  filters: EventFilters,
  options: EventStreamOptions = {},
): Subscription {
  const watchers = sources.map((s) => new NodeWatcher(s, handler, filters, options));
  let stopped: Promise<void> | undefined;
  return {
    unsubscribe() {
      stopped ??= Promise.all(watchers.map((w) => w.stop())).then(() => undefined);
      return stopped;
    },
    get badLines() {
      return watchers.reduce((n, w) => n + w.badLines, 0);
    },
    get connects() {
      return watchers.reduce((n, w) => n + w.connects, 0);
    },
  };
}

/** Attribute keys the engine adds to an event; every other attribute is a container label. */
const engineAttributes = new Set(["name", "image", "exitCode", "signal", "execID", "oldName", "execDuration"]);

interface EngineMessage {
  Type?: unknown;
  Action?: unknown;
  Actor?: { ID?: unknown; Attributes?: Record<string, unknown> };
  time?: unknown;
  timeNano?: unknown;
}

/**
 * A decoded event line as a ContainerEvent; `null` for a well-formed event about something else
 * (not a container), `undefined` when the object is not an engine event at all.
 */
export function toContainerEvent(node: string, msg: unknown): ContainerEvent | null | undefined {
  if (typeof msg !== "object" || msg === null) return undefined;
  const m = msg as EngineMessage;
  if (typeof m.Type !== "string" || typeof m.Action !== "string") return undefined;
  if (m.Type !== "container") return null;
  const id = m.Actor?.ID;
  if (typeof id !== "string" || id === "") return undefined;
  const attrs = m.Actor?.Attributes ?? {};
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(attrs)) {
    if (!engineAttributes.has(k) && typeof v === "string") labels[k] = v;
  }
  const exit = attrs.exitCode;
  const time =
    typeof m.timeNano === "number" ? Math.floor(m.timeNano / 1e6) : typeof m.time === "number" ? m.time * 1000 : 0;
  return {
    type: "container",
    node,
    action: m.Action,
    id,
    name: typeof attrs.name === "string" ? attrs.name : "",
    labels,
    exitCode: typeof exit === "string" && exit !== "" && Number.isFinite(Number(exit)) ? Number(exit) : undefined,
    time,
  };
}

class StreamEndedError extends Error {
  override readonly name = "StreamEndedError";
}

class NodeWatcher {
  badLines = 0;
  connects = 0;
  private state: NodeState | undefined;
  private readonly stopping = new AbortController();
  private readonly done: Promise<void>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly connectTimeoutMs: number;
  private readonly maxLineBytes: number;
  private readonly backoff: Backoff;

  constructor(
    private readonly source: EventSource,
    private readonly handler: EventHandler,
    private readonly filters: EventFilters,
    options: EventStreamOptions,
  ) {
    this.clock = options.clock ?? realClock;
    this.log = (options.logger ?? silentLogger).child({ node: source.node, stream: "events" });
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.maxLineBytes = options.maxLineBytes ?? 1 << 20;
    this.backoff = new Backoff(this.clock, { ...defaultEventBackoff, ...options.backoff });
    this.done = this.run();
  }

  stop(): Promise<void> {
    this.stopping.abort(new Error("unsubscribed"));
    return this.done;
  }

  private async run(): Promise<void> {
    const stop = this.stopping.signal;
    while (!stop.aborted) {
      try {
        await this.session();
      } catch (err) {
        if (stop.aborted) break;
        this.log.debug({ err: String(err) }, "event stream down");
      }
      if (stop.aborted) break;
      try {
        await this.clock.sleep(this.backoff.next(), stop);
      } catch {
        break; // unsubscribed while waiting
      }
    }
  }

  /** One connection: returns (by throwing) when it is over, for whatever reason. */
  private async session(): Promise<void> {
    const conn = new AbortController();
    const onStop = () => conn.abort(this.stopping.signal.reason);
    this.stopping.signal.addEventListener("abort", onStop, { once: true });
    let stream: Readable | undefined;
    try {
      let ended: Promise<never>;
      const buffered: ContainerEvent[] = [];
      let live = false;
      let containers: ContainerSummary[];
      try {
        stream = await this.connect(conn);
        const splitter = new LineSplitter(this.maxLineBytes);
        const s = stream;
        ended = new Promise<never>((_, reject) => {
          s.once("end", () => reject(new StreamEndedError("event stream ended")));
          s.once("close", () => reject(new StreamEndedError("event stream closed")));
          s.once("error", reject);
        });
        ended.catch(() => {}); // awaited below; this only keeps it from counting as unhandled meanwhile
        s.on("data", (chunk: Buffer) => {
          const before = splitter.oversized;
          for (const line of splitter.push(chunk)) {
            const ev = this.decode(line);
            if (!ev) continue;
            if (live) this.deliver(ev);
            else buffered.push(ev);
          }
          this.badLines += splitter.oversized - before;
        });
        // The relist happens with the stream already open, so nothing between the two is missed.
        containers = await Promise.race([this.source.list(this.filters.label, conn.signal), ended]);
      } catch (err) {
        if (!this.stopping.signal.aborted) this.setState("unreachable", err);
        throw err;
      }
      this.connects++;
      this.setState("ready");
      this.deliver({ type: "relist", node: this.source.node, containers });
      live = true;
      for (const ev of buffered) this.deliver(ev);
      buffered.length = 0;
      await ended;
    } finally {
      this.stopping.signal.removeEventListener("abort", onStop);
      conn.abort(new Error("event session over"));
      stream?.destroy();
    }
  }

  private async connect(conn: AbortController): Promise<Readable> {
    const timer = this.clock.setTimer(this.connectTimeoutMs, () =>
      conn.abort(new Error(`event stream did not open within ${this.connectTimeoutMs} ms`)),
    );
    try {
      return await this.source.open({ filters: this.filters }, conn.signal);
    } catch (err) {
      throw conn.signal.aborted ? conn.signal.reason : err;
    } finally {
      timer.cancel();
    }
  }

  private decode(line: string): ContainerEvent | undefined {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      this.badLines++;
      return undefined;
    }
    const ev = toContainerEvent(this.source.node, msg);
    if (ev === undefined) this.badLines++;
    return ev ?? undefined;
  }

  private setState(state: NodeState, err?: unknown): void {
    if (this.state === state) return;
    this.state = state;
    const ev: ClusterEvent = { type: "node", node: this.source.node, state };
    if (err !== undefined) ev.error = err instanceof Error ? err.message : String(err);
    if (state === "unreachable") this.log.warn({ err: ev.error }, "node unreachable");
    else this.log.info("node ready");
    this.deliver(ev);
  }

  /** A throwing handler must not take the stream down: log it and go on. */
  private deliver(ev: ClusterEvent): void {
    try {
      this.handler(ev);
    } catch (err) {
      this.log.error({ err, event: ev.type }, "event handler threw");
    }
  }
}
