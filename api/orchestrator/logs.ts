// GET /api/podgroups/logs (docs/orchestrator.md, "Logs"): a PodGroup's container logs, read from
// the engines. The one PodGroup call that reaches Docker: the log is only there.
//
// Which containers: those the group's status record lists (the controller's observation, the same
// the GET answers), one instance's or every instance's. Every container is read with its engine's
// timestamps; without follow the streams are merged by those times, with follow line by line as
// they arrive. An instance whose log cannot be read is a failure record in the stream and the
// others go on; when none can be read the answer is an error status instead (404 when every
// container is gone, else 503).
//
// The engines' streams last no longer than the client: its disconnect (the request's signal, and
// the body's cancel) aborts every read, which closes the connections to the engines.
import type { Context } from "hono";
import type { Socket } from "node:net";
import { ClusterError, NotFoundError, type Cluster, type LogStream } from "../../adapters/cluster/index.ts";
import type { Logger } from "../../runtime/log.ts";
import { notFound, unavailable } from "../http/index.ts";
import type { PodGroupWithSpec } from "../resources/podgroup.ts";
import { LineAssembler, ndjsonRecord, textRecord, type LogRecord, type LogSource } from "./log-lines.ts";
import { whileAllowed } from "../auth/still-allowed.ts";
import { mergeByTime, mergeFollowing } from "./log-merge.ts";

export interface LogRequest {
  instance?: number;
  /** The instance's previous containers (previousTargets), instead of its current ones. */
  previous?: boolean;
  follow?: boolean;
  tail?: number;
  /** Milliseconds since the epoch. */
  since?: number;
  timestamps?: boolean;
}

/** A container to read: where its lines say they come from, and its engine id. */
export interface LogTarget extends LogSource {
  id: string;
  /** Only lines before this time (ms since the epoch): the earlier runs of a container restarted in place. */
  until?: number;
}

export const ndjsonType = "application/x-ndjson";

/**
 * The most containers one request reads at once: each is a connection to an engine for as long as
 * the answer lasts (kubectl bounds its concurrent log streams the same way).
 */
export const maxLogStreams = 100;

/**
 * The containers `instance` (or every instance) of the group has, by instance then container; or
 * why there are none (a 404), or too many to read at once (a 400 naming `instance`).
 */
export function logTargets(group: PodGroupWithSpec, instance: number | undefined): LogTarget[] | { notFound: string } | { tooMany: string } {
  const name = group.spec.name;
  const pods = [...group.pods].sort((a, b) => a.instanceNo - b.instanceNo);
  const chosen = instance === undefined ? pods : pods.filter((p) => p.instanceNo === instance);
  if (instance !== undefined && chosen.length === 0) {
    const known = pods.map((p) => p.instanceNo).join(", ");
    return { notFound: `podgroup ${name} has no instance ${instance} (${known === "" ? "it has none yet" : `instances: ${known}`})` };
  }
  const targets = chosen.flatMap((p) =>
    p.containers
      .filter((c) => c.id !== "")
      .map((c) => ({ instance: p.instanceNo, container: containerIndex(c.name), node: c.node, id: c.id })),
  );
  if (instance !== undefined && targets.length === 0) {
    return { notFound: `instance ${instance} of podgroup ${name} has no container (state ${chosen[0]!.state})` };
  }
  if (targets.length > maxLogStreams) {
    return { tooMany: `podgroup ${name} has ${targets.length} containers; one request reads at most ${maxLogStreams}: ask for one instance` };
  }
  return targets;
}

/**
 * `previous=true` (docs/orchestrator.md, "Logs"): per container of the instance's pod, the run
 * before the current one.
 *
 * - A container the restart policy started again in place (it runs, and the engine recorded an
 *   exit before this start) holds its earlier runs in its own log: the lines before the current
 *   run, cut halfway between the last exit and this start (the engine stamps a run's first lines
 *   a little before it records the start).
 * - Otherwise the instance's kept previous container of that index (the pod a rollout step or a
 *   rolling restart replaced; the status lists it under `previous`).
 *
 * None at all is a 404 naming the instance. Inspecting the current containers is the one engine
 * call besides the log reads; one that fails counts as "not restarted in place".
 */
export async function previousTargets(
  group: PodGroupWithSpec,
  instance: number,
  cluster: Pick<Cluster, "inspect">,
  signal: AbortSignal,
): Promise<LogTarget[] | { notFound: string }> {
  const name = group.spec.name;
  const pod = group.pods.find((p) => p.instanceNo === instance);
  if (pod === undefined) {
    const known = [...group.pods].sort((a, b) => a.instanceNo - b.instanceNo).map((p) => p.instanceNo).join(", ");
    return { notFound: `podgroup ${name} has no instance ${instance} (${known === "" ? "it has none yet" : `instances: ${known}`})` };
  }
  const kept = new Map((pod.previous ?? []).filter((c) => c.id !== "").map((c) => [containerIndex(c.name), c]));
  const current = new Map(pod.containers.filter((c) => c.id !== "").map((c) => [containerIndex(c.name), c]));
  const indexes = [...new Set([...current.keys(), ...kept.keys()])].sort((a, b) => a - b);
  const chosen = await Promise.all(
    indexes.map(async (index): Promise<LogTarget | undefined> => {
      const c = current.get(index);
      if (c !== undefined) {
        const until = await restartedInPlace(cluster, c, signal);
        if (until !== undefined) return { instance, container: index, node: c.node, id: c.id, until };
      }
      const p = kept.get(index);
      return p === undefined ? undefined : { instance, container: index, node: p.node, id: p.id };
    }),
  );
  const targets = chosen.filter((t): t is LogTarget => t !== undefined);
  if (targets.length === 0) {
    return { notFound: `instance ${instance} of podgroup ${name} has no previous container: none of its containers was restarted or replaced since it was deployed` };
  }
  return targets;
}

/**
 * When `c` runs again after an exit (the restart policy starts a stopped container in place), the
 * time that separates its earlier runs from the current one; undefined otherwise.
 */
export async function restartedInPlace(cluster: Pick<Cluster, "inspect">, c: { node: string; id: string }, signal: AbortSignal): Promise<number | undefined> {
  try {
    const { status } = await cluster.inspect({ node: c.node, id: c.id }, { signal });
    return earlierRunsUntil(status);
  } catch {
    return undefined;
  }
}

/** Pure: the cut between the earlier runs and the current one, from an inspect's state; undefined when there are none. */
export function earlierRunsUntil(s: { running: boolean; restarting: boolean; startedAt: number | undefined; finishedAt: number | undefined }): number | undefined {
  if (!(s.running || s.restarting) || s.startedAt === undefined || s.finishedAt === undefined) return undefined;
  if (!(s.finishedAt < s.startedAt)) return undefined;
  return (s.finishedAt + s.startedAt) / 2;
}

/** A container's index in its pod, from its name (`...-d0-c1`); the first has no suffix. */
function containerIndex(name: string): number {
  const m = /-c(\d{1,3})$/.exec(name);
  return m ? Number(m[1]) : 0;
}

/** The streaming answer for `targets`, or an ApiError when none of their logs can be opened. */
export async function logsResponse(
  c: Context,
  group: PodGroupWithSpec,
  targets: LogTarget[],
  q: LogRequest,
  deps: { cluster: Cluster; log: Logger; stillAllowed?: () => Promise<boolean> },
): Promise<Response> {
  const { cluster } = deps;
  const log = deps.log.child({ podgroup: group.spec.name, ...(q.instance !== undefined && { instance: q.instance }) });
  // A previous run is over: nothing new comes (and a follow read of a restarted container would not stop at `until`).
  const follow = q.follow === true && q.previous !== true;
  const timestamps = q.timestamps === true;
  const ndjson = (c.req.header("accept") ?? "").toLowerCase().includes(ndjsonType);
  const format = ndjson ? ndjsonRecord : textRecord;

  // Aborted when the client goes away or the answer is complete: ends every engine read.
  const reads = new AbortController();
  const request = c.req.raw.signal;
  const clientGone = () => reads.abort(new Error("the client disconnected"));
  request.addEventListener("abort", clientGone, { once: true });
  if (request.aborted) clientGone();
  let stopRechecks: (() => void) | undefined;
  const done = () => {
    stopRechecks?.();
    request.removeEventListener("abort", clientGone);
    if (!reads.signal.aborted) reads.abort(new Error("the answer is complete"));
  };
  // A follow answer can be quiet for hours: TCP keep-alive notices a client that vanished without closing.
  if (follow) (c.env as { incoming?: { socket?: Socket } } | undefined)?.incoming?.socket?.setKeepAlive(true, 30_000);
  // And its caller's token and grants are checked again as they change: a revoked one ends it.
  if (follow && deps.stillAllowed !== undefined) {
    stopRechecks = whileAllowed(deps.stillAllowed, () => {
      log.info("log stream ended: the caller's token or grants no longer allow it");
      reads.abort(new Error("the caller may no longer read this group"));
    });
  }

  const opened = await Promise.all(
    targets.map(async (t) => {
      try {
        const stream = await cluster.logs(
          { node: t.node, id: t.id },
          {
            follow,
            timestamps: true,
            signal: reads.signal,
            // The engine counts `tail` back from the end of the whole log, before it applies
            // `until`: the tail of earlier runs is kept here instead (linesOf).
            ...(q.tail !== undefined && t.until === undefined && { tail: q.tail }),
            ...(q.since !== undefined && { since: q.since }),
            ...(t.until !== undefined && { until: t.until }),
          },
        );
        return { target: t, stream };
      } catch (err) {
        return { target: t, err };
      }
    }),
  );
  if (reads.signal.aborted) {
    // The client went away while the streams were being opened: nobody reads the answer.
    done();
    return new Response(null, { status: 204 });
  }
  const bug = opened.find((o) => o.stream === undefined && !(o.err instanceof ClusterError));
  if (bug !== undefined || (opened.length > 0 && opened.every((o) => o.stream === undefined))) {
    done();
    throw bug?.err ?? noneOpened(group.spec.name, opened.map((o) => o.err)); // a bug is a 500, in the log
  }
  log.debug({ containers: opened.length, follow }, "log stream opened");

  const sources = opened.map((o) =>
    o.stream ? linesOf(o.target, o.stream, reads.signal, log, o.target.until !== undefined ? q.tail : undefined) : failed(o.target, o.err),
  );
  // One source needs no merge; several are merged in time order, a follow within a quarter second.
  const records = (follow ? (sources.length === 1 ? sources[0]! : mergeFollowing(sources)) : mergeByTime(sources))[Symbol.asyncIterator]();
  const encoder = new TextEncoder();
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await records.next();
        if (cancelled) return; // the client left while this read was waiting
        if (r.done) {
          done();
          controller.close();
          log.debug("log stream complete");
        } else {
          controller.enqueue(encoder.encode(r.value.map((rec) => format(rec, timestamps)).join("")));
        }
      } catch (err) {
        if (cancelled) return;
        // Sources turn their failures into records: this is a bug.
        log.error({ err }, "log stream failed");
        done();
        controller.error(err);
      }
    },
    cancel() {
      cancelled = true;
      clientGone();
      done();
      void records.return(undefined).catch(() => undefined);
      log.debug("log stream cancelled by the client");
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": ndjson ? ndjsonType : "text/plain; charset=utf-8",
      "cache-control": "no-store",
      // Container output shown by a browser is text, never HTML it guessed.
      "x-content-type-options": "nosniff",
      // A proxy that buffers answers (nginx does) would hold a follow stream back.
      "x-accel-buffering": "no",
    },
  });
}

/**
 * One container's records; a failure becomes a record, and the end of the client ends it quietly.
 * `keepLast`: only the last that many lines, counted here (a read that ends: `until`).
 */
async function* linesOf(target: LogTarget, stream: LogStream, signal: AbortSignal, log: Logger, keepLast?: number): AsyncGenerator<LogRecord[], void, undefined> {
  const { id: _id, until: _until, ...source } = target;
  const lines = new LineAssembler(source, { framed: !stream.tty });
  let kept: LogRecord[] = [];
  const lastOf = (records: LogRecord[]) => (keepLast === undefined ? records : keepLast === 0 ? [] : records.slice(-keepLast));
  const keep = (records: LogRecord[]) => {
    kept.push(...records);
    if (kept.length > 2 * (keepLast ?? 0) + 1024) kept = lastOf(kept);
  };
  try {
    for await (const frames of stream) {
      const records = lines.push(frames);
      if (keepLast !== undefined) keep(records);
      else if (records.length > 0) yield records;
    }
    const rest = lines.end();
    if (keepLast !== undefined) {
      keep(rest);
      const last = lastOf(kept);
      if (last.length > 0) yield last;
    } else if (rest.length > 0) yield rest;
  } catch (err) {
    if (signal.aborted) return;
    log.warn({ err, instance: target.instance, node: target.node, container: target.id }, "reading a container's log failed");
    yield [...(keepLast !== undefined ? lastOf([...kept, ...lines.end()]) : lines.end()), lines.failure(messageOf(err))];
  }
}

/** A container whose log could not be opened: one failure record. */
async function* failed(target: LogTarget, err: unknown): AsyncGenerator<LogRecord[], void, undefined> {
  const { id: _id, until: _until, ...source } = target;
  yield [{ ...source, error: messageOf(err), time: "" }];
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The answer when no container's log could be opened: 404 when they are all gone, else 503. */
function noneOpened(group: string, errors: unknown[]): Error {
  if (errors.every((e) => e instanceof NotFoundError && e.resource === "container")) {
    return notFound(`the containers of podgroup ${group} that its status lists no longer exist (the status is behind the engines; retry in a moment)`);
  }
  return unavailable(`cannot read the logs of podgroup ${group}: ${errors.map(messageOf).join("; ")}`);
}
