// A store watch over one raw etcd Watch stream (etcd3's public `watchClient`), not over etcd3's
// Watcher/WatchManager, because that layer cannot keep the store's promises (docs/store.md,
// "EtcdStore and the etcd3 package"):
// - it resumes after a reconnect from header.revision + 1: the created response
//   and catch-up batches carry the *current* store revision, so a disconnect there skips history;
// - it drops compact_revision when etcd cancels a watch for compaction (only a text error remains);
// - one WatchManager stream multiplexes every watcher, and a WatchProgressRequest is answered with
//   watch_id -1, for which etcd3 throws "Failed to find watcher" inside the stream's data handler.
// Here one store watch owns one stream. It never resumes: any break ends it with onError exactly
// once (CompactedError or WatchBrokenError) and the consumer relists, as the interface says.
import type { IDuplexStream, IWatchRequest, IWatchResponse, WatchClient } from "etcd3";
import { CompactedError, WatchBrokenError } from "./errors.ts";
import { toWatchEvent } from "./etcd-kv.ts";
import type { Watch, WatchHandlers } from "./store.ts";

type WatchStream = IDuplexStream<IWatchRequest, IWatchResponse>;

export interface EtcdWatchOptions {
  watchClient: WatchClient;
  /** Watched byte range [key, rangeEnd); rangeEnd "\0" means "every key >= key" (etcd's rule). */
  key: Buffer;
  rangeEnd: Buffer;
  fromRevision: number;
  /** Ask etcd for each event's previous version (WatchEvent.prevKv). */
  prevKv: boolean;
  handlers: WatchHandlers;
  /** How long etcd may take to confirm the watch (connect + created response). */
  createTimeoutMs: number;
  /** Whether this etcd answers WatchProgressRequest in order with events (see EtcdStore). */
  progressRequestsSafe: () => Promise<boolean>;
  /** Called once when the watch ends, however it ends. */
  onDone: (watch: EtcdWatch) => void;
}

export class EtcdWatch implements Watch {
  private stream: WatchStream | null = null;
  private created = false;
  private done = false;
  private progressWanted = false;
  private createTimer: NodeJS.Timeout | null = null;
  /**
   * The next revision the consumer has not seen yet, from our own bookkeeping: last delivered
   * event's modRevision + 1, or a progress notification's revision + 1. Used only to say where a
   * compaction overtook the watch; never to resume.
   */
  private nextRevision: number;

  constructor(private readonly options: EtcdWatchOptions) {
    this.nextRevision = options.fromRevision;
    this.createTimer = setTimeout(() => {
      this.fail(new WatchBrokenError(`etcd did not confirm the watch within ${options.createTimeoutMs} ms`));
    }, options.createTimeoutMs);
    options.watchClient.watch().then(
      (stream) => this.attach(stream),
      (error: unknown) => this.fail(new WatchBrokenError("could not open an etcd watch stream", error)),
    );
  }

  requestProgress(): void {
    if (this.done) return;
    void this.options.progressRequestsSafe().then((safe) => {
      // On an etcd without safe progress requests the server's periodic progress notification
      // (progress_notify, --experimental-watch-progress-notify-interval) is the only sound one.
      if (!safe || this.done) return;
      if (this.created) this.sendProgressRequest();
      else this.progressWanted = true;
    });
  }

  async close(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.teardown();
  }

  private attach(stream: WatchStream): void {
    // The listeners stay attached after the watch is done: cancelling the stream emits 'error'
    // (CANCELLED), and an EventEmitter 'error' without a listener would throw.
    stream.on("data", (response) => this.onResponse(response));
    stream.on("error", (error) => this.fail(new WatchBrokenError(`etcd watch stream failed: ${error.message}`, error)));
    stream.on("end", () => this.fail(new WatchBrokenError("etcd closed the watch stream")));
    if (this.done) {
      closeStream(stream); // closed (or timed out) while the stream was being opened
      return;
    }
    this.stream = stream;
    stream.write({
      create_request: {
        key: this.options.key,
        range_end: this.options.rangeEnd,
        start_revision: this.options.fromRevision,
        prev_kv: this.options.prevKv,
        progress_notify: true,
      },
    });
  }

  private onResponse(response: IWatchResponse): void {
    if (this.done) return;
    if (response.canceled) {
      // etcd cancels with compact_revision set (and no cancel_reason) when the start revision, or
      // a slow watcher's catch-up position, is below the compact revision.
      const compactRevision = Number(response.compact_revision);
      this.fail(
        compactRevision > 0
          ? new CompactedError(compactRevision, this.nextRevision)
          : new WatchBrokenError(`etcd cancelled the watch: ${response.cancel_reason || "no reason given"}`),
      );
      return;
    }
    if (response.created) {
      // Its header revision is the store's current revision, not a progress mark: catch-up events
      // below it may still follow. It only confirms the watch.
      this.created = true;
      this.clearCreateTimer();
      if (this.progressWanted) this.sendProgressRequest();
      return;
    }
    if (response.events.length > 0) {
      // etcd never splits one revision across responses (no `fragment` requested), so handing a
      // whole response to onEvents keeps "all events of one revision in one call".
      const events = response.events.map(toWatchEvent);
      this.nextRevision = events[events.length - 1]!.kv.modRevision + 1;
      this.invoke(() => this.options.handlers.onEvents(events));
      return;
    }
    // No events, not created: a progress notification (periodic, or the answer to a progress
    // request, watch_id -1). Everything up to header.revision has been sent on this stream.
    const revision = Number(response.header.revision);
    if (revision >= this.nextRevision) this.nextRevision = revision + 1;
    this.invoke(() => this.options.handlers.onProgress?.(revision));
  }

  private sendProgressRequest(): void {
    this.progressWanted = false;
    this.stream?.write({ progress_request: {} });
  }

  /** A throwing handler stops the watch (its cache may be half-updated): the consumer relists. */
  private invoke(handler: () => void): void {
    try {
      handler();
    } catch (error) {
      this.fail(new WatchBrokenError("a watch handler threw; the watch is stopped", error));
    }
  }

  private fail(error: Error): void {
    if (this.done) return;
    this.done = true;
    this.teardown();
    try {
      this.options.handlers.onError(error);
    } catch (handlerError) {
      // A bug in the consumer's onError: surface it like any uncaught handler error, but outside
      // the gRPC stream's callback so etcd3's stream bookkeeping is not disturbed.
      setImmediate(() => {
        throw handlerError;
      });
    }
  }

  private teardown(): void {
    this.clearCreateTimer();
    if (this.stream) closeStream(this.stream);
    this.stream = null;
    this.options.onDone(this);
  }

  private clearCreateTimer(): void {
    if (this.createTimer) clearTimeout(this.createTimer);
    this.createTimer = null;
  }
}

/**
 * The store's compact revision, which etcd's Range error does not carry ("required revision has
 * been compacted"). A watch from revision 1 on a key nobody writes is cancelled by etcd with
 * compact_revision set as soon as its watcher group is synced (every 100 ms), before any history
 * is read. Resolves null when etcd does not answer that way within the timeout (no compaction yet,
 * or etcd unreachable).
 */
export function probeCompactRevision(watchClient: WatchClient, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    let stream: WatchStream | null = null;
    let settled = false;
    const finish = (revision: number | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (stream) closeStream(stream);
      resolve(revision);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    watchClient.watch().then(
      (opened) => {
        opened.on("data", (response) => {
          if (response.canceled) {
            const compactRevision = Number(response.compact_revision);
            finish(compactRevision > 0 ? compactRevision : null);
          }
        });
        opened.on("error", () => finish(null));
        opened.on("end", () => finish(null));
        if (settled) {
          closeStream(opened);
          return;
        }
        stream = opened;
        opened.write({ create_request: { key: Buffer.from([0]), start_revision: 1 } });
      },
      () => finish(null),
    );
  });
}

/**
 * Ends a watch stream from our side. end() before cancel(): etcd3 reports a stream error to its
 * per-host fault handling only while the stream is writable, and it counts the resulting CANCELLED
 * as a host failure. Without end(), three closed watches in a row would reset the host's gRPC
 * channels (failing other calls in flight) and open its circuit breaker for five seconds.
 */
function closeStream(stream: WatchStream): void {
  stream.end();
  stream.cancel();
}
