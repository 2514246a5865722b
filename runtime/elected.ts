// Runnables under a leader key of their own (docs/runtime.md, "Work under its own leader key"):
// work that must run once per store whatever processes share it, not once per process role. The
// store compactor (one per store) and Secret-sync (one per store, whether a `capstan up`, a
// `capstan secrets` or both run on it) are such work. ElectedRunnables is one always-running
// runnable for the process's Manager (add it with {leaderOnly: false}): it campaigns for its key
// with an elector of its own and runs its runnables while it holds that key. Writes they make are
// fenced by this elector's lease (fence()), never by the process's other election. A lost term
// campaigns again (recampaign): losing this key is no reason to stop the process; the next term
// starts only after every runnable of the last one has finished.
import type { Registry } from "prom-client";
import type { Clock } from "./clock.ts";
import { LeaderElector, type ElectionStore, type Fence } from "./leaderelection.ts";
import type { Logger } from "./log.ts";
import type { Runnable } from "./manager.ts";

export interface ElectedRunnablesOptions {
  store: ElectionStore;
  /** The leader key every process running this work shares. */
  key: string;
  /** Unique per process (the process's elector identity will do: the keys differ). */
  identity: string;
  /** Lease timings (the elector's defaults when absent). */
  lease?: { ttlSeconds: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** Holders known to be gone (LeaderElectorOptions.goneHolders). */
  goneHolders?: ReadonlySet<string>;
  /** Names the runnable in the manager's logs (default "elected:KEY"). */
  name?: string;
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

export class ElectedRunnables implements Runnable {
  readonly name: string;
  private readonly elector: LeaderElector;
  private readonly runnables: Runnable[] = [];
  private started = false;

  constructor(opts: ElectedRunnablesOptions) {
    this.name = opts.name ?? `elected:${opts.key}`;
    this.elector = new LeaderElector({
      store: opts.store,
      key: opts.key,
      identity: opts.identity,
      recampaign: true,
      ...(opts.log && { log: opts.log }),
      ...(opts.registry && { registry: opts.registry }),
      ...(opts.clock && { clock: opts.clock }),
      ...opts.lease,
      ...(opts.goneHolders && { goneHolders: opts.goneHolders }),
    });
  }

  /** Run `runnable` in every term of this key. Before start() only. */
  add(runnable: Runnable): this {
    if (this.started) throw new Error(`${this.name}: add() after start()`);
    this.runnables.push(runnable);
    return this;
  }

  /** This key's current fence (null when not leading): what the runnables' writes compare. */
  fence(): Fence | null {
    return this.elector.fence();
  }

  /** Leading, following or campaigning (for a readiness check or a test). */
  state(): ReturnType<LeaderElector["state"]> {
    return this.elector.state();
  }

  /**
   * Campaign until `signal` aborts, running the runnables while leading. A runnable that fails
   * while its term lasts fails this runnable (and so the manager), as a leader-only runnable of
   * the process's own election would.
   */
  async start(signal: AbortSignal): Promise<void> {
    this.started = true;
    let term: Promise<void> = Promise.resolve();
    let failure: ((e: unknown) => void) | undefined;
    const failed = new Promise<never>((_, reject) => (failure = reject));
    failed.catch(() => {});
    this.elector.start({
      onStartedLeading: (leading) => {
        term = Promise.all(
          this.runnables.map((r) =>
            r.start(leading).catch((e: unknown) => {
              if (!leading.aborted) failure?.(e);
            }),
          ),
        ).then(() => {});
      },
      onStoppedLeading: () => term,
    });
    try {
      await Promise.race([
        failed,
        new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener("abort", () => resolve(), { once: true });
        }),
      ]);
    } finally {
      await this.elector.stop();
      await term;
    }
  }
}
