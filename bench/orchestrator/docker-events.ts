// Docker's own view of "running", the one observer every leg shares: each engine's /events stream,
// filtered to container start events carrying a label. The time a leg's containers are running is
// the arrival of the start event that completes the set, read straight from the engines, not from
// Capstan or Swarm bookkeeping.
import type Docker from "dockerode";
import { LineSplitter } from "../../adapters/cluster/ndjson.ts";

export interface StartEvent {
  /** performance.now() when the event arrived. */
  at: number;
  node: string;
  id: string;
  labels: Record<string, string>;
}

type Check = { test: (events: StartEvent[]) => boolean; resolve: (at: number) => void };

export class StartEvents {
  readonly events: StartEvent[] = [];
  private readonly checks = new Set<Check>();

  private constructor(private readonly abort: AbortController) {}

  /**
   * Subscribes to container start events with `label` (a "key" or "key=value" filter) on every
   * engine. Resolves once every stream is connected, so nothing started afterwards is missed.
   */
  static async open(engines: Record<string, Docker>, label: string, connectTimeoutMs = 10_000): Promise<StartEvents> {
    const abort = new AbortController();
    const self = new StartEvents(abort);
    const timer = setTimeout(() => abort.abort(new Error("docker events: connect timeout")), connectTimeoutMs);
    try {
      await Promise.all(
        Object.entries(engines).map(async ([node, docker]) => {
          const stream = (await docker.getEvents({
            filters: { type: ["container"], event: ["start"], label: [label] },
            abortSignal: abort.signal,
          } as Docker.GetEventsOptions)) as NodeJS.ReadableStream;
          const lines = new LineSplitter();
          stream.on("data", (chunk: Buffer) => {
            for (const line of lines.push(chunk)) self.add(node, line);
          });
          // Closing aborts the request; nothing else ends these streams while a leg runs.
          stream.on("error", () => undefined);
        }),
      );
    } catch (err) {
      abort.abort();
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return self;
  }

  private add(node: string, line: string): void {
    const at = performance.now();
    const msg = JSON.parse(line) as { id?: string; Actor?: { ID?: string; Attributes?: Record<string, string> } };
    this.events.push({ at, node, id: msg.Actor?.ID ?? msg.id ?? "", labels: msg.Actor?.Attributes ?? {} });
    for (const c of this.checks) {
      if (c.test(this.events)) {
        this.checks.delete(c);
        c.resolve(at);
      }
    }
  }

  /** Resolves with the arrival time of the event after which `test` holds (at once if it already does). */
  until(test: (events: StartEvent[]) => boolean, timeoutMs: number, what: string): Promise<number> {
    if (test(this.events)) return Promise.resolve(this.events.at(-1)?.at ?? performance.now());
    return new Promise((resolve, reject) => {
      const check: Check = {
        test,
        resolve: (at) => {
          clearTimeout(timer);
          resolve(at);
        },
      };
      const timer = setTimeout(() => {
        this.checks.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${this.events.length} start events seen)`));
      }, timeoutMs);
      this.checks.add(check);
    });
  }

  /** Start events whose labels include every pair given. */
  matching(labels: Record<string, string>): StartEvent[] {
    return this.events.filter((e) => Object.entries(labels).every(([k, v]) => e.labels[k] === v));
  }

  close(): void {
    this.abort.abort();
  }
}
