// Which secret writes Secret-sync hears about: one store watch per PodGroup whose spec lists
// secret files, on that group's proc (/platform/secrets/<app>/<proc>/), and nothing else. A write
// to a proc no group lists reaches no watch here, so it costs this process nothing: etcd does not
// send it (one watch over all of /platform/secrets/ made every PUT cost the secrets process a
// decoded watch event, about 0.05 ms, and its initial list read every record's ciphertext).
//
// Invariants:
// - W1 a group that lists secrets is enqueued after its watch's start revision R is read, and the
//   watch delivers every write after R: the reconcile reads the records at a revision >= R, so no
//   write falls between "read" and "watched". The same holds after a broken watch is reopened.
// - W2 the watches follow the specs informer: a spec that starts listing secrets opens its watch,
//   one that stops (or is deleted or deleting) closes it. Events only enqueue; the reconciler
//   decides from the spec and the store (level-triggered), so an extra event is harmless.
// - W3 the source runs only while the controller does (leader only): stop() closes every watch,
//   and no callback of a closed watch enqueues.
import type { Store, Watch } from "../../adapters/store/store.ts";
import type { Clock, TimerHandle } from "../../runtime/clock.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Logger } from "../../runtime/log.ts";
import type { Enqueue, Source } from "../../runtime/source.ts";
import { groupKey } from "./reconciler.ts";
import { appOf, listsSecrets, type SpecEntry } from "./specs.ts";

export interface ProcSecretWatchesOptions {
  store: Store;
  specs: Informer<SpecEntry>;
  /** Secret records' prefix, with its trailing "/" (/platform/secrets/). */
  secretsPrefix: string;
  /** How soon a watch that broke (or could not start) is opened again. */
  retryMs: number;
  clock: Clock;
  log: Logger;
}

/** One proc's watch; `closed` once its group no longer lists secrets or the source stopped. */
interface ProcWatch {
  closed: boolean;
  watch: Watch | null;
  retry: TimerHandle | null;
}

export class ProcSecretWatches implements Source {
  readonly name = "secrets:secretsync";
  private enqueue: Enqueue | null = null;
  private unregister: (() => void) | null = null;
  private readonly watches = new Map<string, ProcWatch>();

  constructor(private readonly o: ProcSecretWatchesOptions) {}

  start(enqueue: Enqueue): void {
    this.stop();
    this.enqueue = enqueue;
    // Replays every cached spec as an add, then follows changes (W2).
    this.unregister = this.o.specs.addEventHandler({
      onAdd: (e) => this.follow(e),
      onUpdate: (_old, e) => this.follow(e),
      onDelete: (e) => this.close(e.name),
    });
  }

  stop(): void {
    this.unregister?.();
    this.unregister = null;
    this.enqueue = null;
    for (const name of [...this.watches.keys()]) this.close(name);
  }

  /** Number of open proc watches (tests, metrics). */
  get size(): number {
    return this.watches.size;
  }

  private follow(e: SpecEntry): void {
    if (!listsSecrets(e) || e.deleting) {
      this.close(e.name);
      return;
    }
    if (this.watches.has(e.name)) return;
    const w: ProcWatch = { closed: false, watch: null, retry: null };
    this.watches.set(e.name, w);
    void this.open(e.name, w);
  }

  private async open(proc: string, w: ProcWatch): Promise<void> {
    w.retry = null;
    let revision: number;
    try {
      revision = await this.o.store.revision();
    } catch (err) {
      this.retryLater(proc, w, err);
      return;
    }
    if (w.closed) return;
    w.watch = this.o.store.watch(`${this.o.secretsPrefix}${appOf(proc)}/${proc}/`, revision + 1, {
      onEvents: () => {
        if (!w.closed) this.enqueue?.(groupKey(proc));
      },
      onError: (err) => {
        w.watch = null;
        this.retryLater(proc, w, err);
      },
    });
    this.enqueue?.(groupKey(proc)); // W1: after R was read
  }

  private retryLater(proc: string, w: ProcWatch, err: unknown): void {
    if (w.closed) return;
    this.o.log.warn({ err, podGroup: proc, retryMs: this.o.retryMs }, "secret watch of a group ended; reopened");
    w.retry = this.o.clock.setTimer(this.o.retryMs, () => void this.open(proc, w));
  }

  private close(proc: string): void {
    const w = this.watches.get(proc);
    if (!w) return;
    this.watches.delete(proc);
    w.closed = true;
    w.retry?.cancel();
    void w.watch?.close();
  }
}
