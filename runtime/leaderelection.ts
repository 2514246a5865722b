// Leader election on a store lease, with a fence (docs/runtime.md, "Leader election and fencing").
//
// Campaign: when the leader key is absent, grant a lease (TTL, default 15 s) and create the key
// with a create-only transaction (createRevision == 0), value = identity, attached to the lease.
// The winner's fence is {key, createRevision}: the key's createRevision changes whenever
// leadership changes hands, so a write that also compares it (adapters/store/fenced.ts) is refused
// by the store once its writer is no longer the leader, however late the writer learns of it.
//
// Leading: every TTL/3 the leader renews (one lease keep-alive plus a read of the key to check it
// is still ours). It steps down by itself when no renewal has succeeded for renewDeadline
// (default 10 s), counted from when the last successful renewal was *sent*; the store expires the
// lease no earlier than TTL after that same moment, so the leader stops acting before anyone else
// can be elected (as long as the two clocks run at similar rates: TTL / renewDeadline is the
// tolerated rate ratio, client-go's caveat). We do not wait for etcd3's `lost` event, which comes
// only after 2 x TTL. A lease-lost answer or a key that is gone or re-created steps down at once.
// Even so, fenced writes are what make a late step-down harmless for the store.
//
// Following: a follower reads the key every retryPeriod (2 s) and, between reads, watches it, so
// that a released key (clean shutdown revokes the lease and with it the key) is taken over at once
// instead of after the next retry.
//
// A holder known to be gone (goneHolders: on the embedded store, the role's OS lock proves it) is
// not waited for: its key is deleted and the campaign goes on at once (docs/runtime.md).
//
// Step-down aborts the AbortSignal handed to onStartedLeading at once (no grace period: another
// process may already lead), calls onStoppedLeading and meanwhile revokes the lease (best effort,
// bounded by retryPeriod), so that a follower need not wait out the TTL. Whether the process then
// exits or campaigns again is the caller's choice (Manager: exit by default, see manager.ts).
import { Registry } from "prom-client";
import { realClock, type Clock } from "./clock.ts";
import { withDeadline } from "./deadline.ts";
import {
  isLeaseLostError,
  type KeyValueLike,
  type ListPage,
  type WatchHandlersLike,
  type WatchLike,
} from "./listwatch.ts";
import { silentLogger, type Logger } from "./log.ts";
import { gauge } from "./metrics.ts";

/** What identifies one leadership term: the leader key and the revision at which it was created. */
export interface Fence {
  key: string;
  createRevision: number;
}

export interface LeaseLike {
  readonly id: string;
  keepAliveOnce(): Promise<number>;
  revoke(): Promise<void>;
}

/** The store operations election needs (adapters/store's Store satisfies it). */
export interface ElectionStore {
  grantLease(ttlSeconds: number): Promise<LeaseLike>;
  txn(
    compares: { key: string; target: "createRevision"; equals: number }[],
    success: ({ type: "put"; key: string; value: string; lease?: string } | { type: "delete"; key: string })[],
  ): Promise<{ succeeded: boolean; revision: number }>;
  get(key: string): Promise<KeyValueLike | null>;
  /** A follower reads the leader key with list(key, {limit: 1}): it also answers the read revision. */
  list(prefix: string, options: { limit: number }): Promise<ListPage>;
  watch(prefix: string, fromRevision: number, handlers: WatchHandlersLike): WatchLike;
}

export type ElectorState = "campaigning" | "following" | "leading" | "stopped";

export interface StoppedLeading {
  /** "lost": leadership ended against our will; "released": stop() gave it up. */
  kind: "lost" | "released";
  reason: string;
}

export interface LeadershipCallbacks {
  /** Start leader-only work; `signal` aborts the moment leadership ends. */
  onStartedLeading(signal: AbortSignal): void;
  /** Called after the signal has been aborted. The elector waits for it before campaigning again. */
  onStoppedLeading(info: StoppedLeading): void | Promise<void>;
}

/** The elector a Manager drives (LeaderElector; tests may drive the Manager with their own). */
export interface Elector {
  readonly identity: string;
  start(callbacks: LeadershipCallbacks): void;
  /** Stop campaigning or leading and give leadership up (revoking the lease). */
  stop(): Promise<void>;
  /** The current term's fence, or null when not leading. Read it at every write. */
  fence(): Fence | null;
  state(): ElectorState;
}

export class LeadershipLostError extends Error {
  override readonly name = "LeadershipLostError";
  constructor(reason: string) {
    super(`leadership lost: ${reason}`);
  }
}

export interface LeaderElectorOptions {
  store: ElectionStore;
  /** The leader key, e.g. /platform/orchestrator/leader. */
  key: string;
  /** Who we are (stored as the key's value); unique per process, e.g. host:pid:random. */
  identity: string;
  /** Names the election in logs and in leader_election_master_status{name}. */
  name?: string;
  /** Lease TTL (default 15 s). */
  ttlSeconds?: number;
  /** Step down when no renewal has succeeded for this long (default 10 s; must be < TTL). */
  renewDeadlineMs?: number;
  /** Follower retry period and leader renewal retry after a failure (default 2 s). */
  retryPeriodMs?: number;
  /** After losing leadership, campaign again instead of stopping (default false). */
  recampaign?: boolean;
  /**
   * Identities known to be gone for good (on the embedded store, earlier holders of the role's OS
   * lock: docs/store.md, "One process per role"). A leader key one of them holds is taken over at once
   * instead of after its lease runs out. Never set on etcd, where nothing proves a holder dead.
   */
  goneHolders?: ReadonlySet<string>;
  clock?: Clock;
  log?: Logger;
  registry?: Registry;
}

interface Term {
  lease: LeaseLike;
  fence: Fence;
  /** When the request that last renewed the lease was sent. */
  renewSentAt: number;
}

/** controller-runtime's leader_election_master_status{name}: 1 while leading, else 0. */
function masterStatusGauge(registry: Registry | undefined): ReturnType<typeof gauge<"name">> {
  return gauge(registry ?? new Registry(), {
    name: "leader_election_master_status",
    help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
    labelNames: ["name"],
  });
}

export class LeaderElector implements Elector {
  readonly identity: string;
  private readonly store: ElectionStore;
  private readonly key: string;
  private readonly name: string;
  private readonly ttlSeconds: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly renewIntervalMs: number;
  private readonly recampaign: boolean;
  private readonly goneHolders: ReadonlySet<string>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly status: ReturnType<typeof gauge<"name">>;

  private current: ElectorState = "stopped";
  private term: Term | undefined;
  private leaderAbort: AbortController | undefined;
  /**
   * A lease granted for a campaign whose outcome we do not know yet (the txn timed out), with when
   * its grant was sent: the store counts its TTL from no earlier than that, so a term won through
   * it must count its renew deadline from then too.
   */
  private pendingLease: { lease: LeaseLike; sentAt: number } | undefined;
  private stopController: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private callbacks: LeadershipCallbacks | undefined;

  constructor(opts: LeaderElectorOptions) {
    this.store = opts.store;
    this.key = opts.key;
    this.identity = opts.identity;
    this.name = opts.name ?? opts.key;
    this.ttlSeconds = opts.ttlSeconds ?? 15;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    this.renewIntervalMs = (this.ttlSeconds * 1000) / 3;
    this.recampaign = opts.recampaign ?? false;
    this.goneHolders = opts.goneHolders ?? new Set();
    this.clock = opts.clock ?? realClock;
    this.log = (opts.log ?? silentLogger).child({ election: this.name, identity: this.identity });
    if (!opts.key) throw new TypeError("leader election: key is required");
    if (!opts.identity) throw new TypeError("leader election: identity is required");
    if (!Number.isInteger(this.ttlSeconds) || this.ttlSeconds < 2) {
      throw new RangeError("leader election: ttlSeconds must be an integer >= 2 (etcd's minimum lease TTL)");
    }
    // client-go's constraints: LeaseDuration > RenewDeadline > 1.2 x RetryPeriod.
    if (!(this.renewDeadlineMs < this.ttlSeconds * 1000)) {
      throw new RangeError("leader election: renewDeadlineMs must be shorter than the lease TTL");
    }
    if (!(this.renewDeadlineMs > 1.2 * this.retryPeriodMs)) {
      throw new RangeError("leader election: renewDeadlineMs must exceed 1.2 x retryPeriodMs");
    }
    this.status = masterStatusGauge(opts.registry);
    this.status.set({ name: this.name }, 0);
  }

  start(callbacks: LeadershipCallbacks): void {
    if (this.loop) throw new Error(`leader election ${this.name} already started`);
    this.callbacks = callbacks;
    this.stopController = new AbortController();
    this.current = "campaigning";
    this.loop = this.run(this.stopController.signal);
  }

  async stop(): Promise<void> {
    this.stopController?.abort(new Error("leader election stopping"));
    await this.loop;
    const term = this.term;
    if (term) {
      this.endTerm();
      await this.revoke(term.lease);
      await this.notifyStopped({ kind: "released", reason: "stopped" });
    }
    await this.dropPendingLease();
    this.current = "stopped";
  }

  fence(): Fence | null {
    return this.term ? { ...this.term.fence } : null;
  }

  state(): ElectorState {
    return this.current;
  }

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const term = await this.campaign(signal);
      if (!term) return;
      const lost = await this.lead(term, signal);
      if (lost === undefined) return; // stop() releases the term
      // The term is over (endTerm forgot it, so stop() has nothing left to revoke): give the lease
      // back now, or a follower waits out its TTL. Best effort, while the callback runs.
      await Promise.all([this.revoke(term.lease), this.notifyStopped({ kind: "lost", reason: lost })]);
      if (!this.recampaign) {
        this.current = "stopped";
        return;
      }
    }
  }

  /** Campaign until elected (returns the term) or stopped (returns undefined). */
  private async campaign(signal: AbortSignal): Promise<Term | undefined> {
    while (!signal.aborted) {
      try {
        const { holder, readAt } = await this.call(this.readLeaderKey(), "read leader key", signal);
        if (holder && this.pendingLease && holder.lease === this.pendingLease.lease.id) {
          // Our earlier create went through although we never saw the answer.
          const { lease, sentAt } = this.pendingLease;
          this.pendingLease = undefined;
          return this.won(lease, holder.createRevision, sentAt);
        }
        await this.dropPendingLease();
        if (holder && holder.lease !== undefined && this.goneHolders.has(holder.value)) {
          // Its holder is proven gone: delete the key (only that term's, compared on its
          // createRevision) and campaign again at once; a new term gets a new createRevision.
          this.log.info({ holder: holder.value }, "the leader key's holder is gone; taking over without waiting for its lease");
          await this.call(
            this.store.txn([{ key: this.key, target: "createRevision", equals: holder.createRevision }], [{ type: "delete", key: this.key }]),
            "delete a gone holder's leader key",
            signal,
          );
          continue;
        }
        // Every elector attaches its lease to the key, so a key without one was written by something
        // else (an older Capstan, a hand-made put) and would never expire: nobody could ever lead.
        // It is taken over in place, compared on its createRevision so that only that key is.
        const orphan = holder !== null && holder.lease === undefined ? holder : undefined;
        if (holder && !orphan) {
          if (this.current !== "following") this.log.info({ leader: holder.value }, "following");
          this.current = "following";
          await this.waitForVacancy(readAt, signal);
          continue;
        }
        if (orphan) this.log.warn({ holder: orphan.value }, "the leader key has no lease and would never expire; taking it over");
        const sentAt = this.clock.now();
        const lease = await this.call(this.store.grantLease(this.ttlSeconds), "grant lease", signal);
        this.pendingLease = { lease, sentAt };
        const res = await this.call(
          this.store.txn(
            [{ key: this.key, target: "createRevision", equals: orphan?.createRevision ?? 0 }],
            [{ type: "put", key: this.key, value: this.identity, lease: lease.id }],
          ),
          "create leader key",
          signal,
        );
        if (res.succeeded) {
          this.pendingLease = undefined;
          // A put that creates a key sets its createRevision to the transaction's revision; one that
          // takes over an orphan keeps the orphan's.
          return this.won(lease, orphan?.createRevision ?? res.revision, sentAt);
        }
        await this.dropPendingLease();
        this.current = "following";
      } catch (e) {
        if (signal.aborted) return undefined;
        this.log.warn({ err: e }, "campaign attempt failed; retrying");
      }
      await this.clock.sleep(this.retryPeriodMs, signal).catch(() => {});
    }
    return undefined;
  }

  private won(lease: LeaseLike, createRevision: number, renewSentAt: number): Term {
    const term: Term = { lease, fence: { key: this.key, createRevision }, renewSentAt };
    this.log.info({ createRevision, lease: lease.id }, "elected leader");
    return term;
  }

  /** The leader key (null when absent) and the store revision it was read at. */
  private async readLeaderKey(): Promise<{ holder: KeyValueLike | null; readAt: number }> {
    // The leader key sorts first among the keys it prefixes, so one item is enough.
    const page = await this.store.list(this.key, { limit: 1 });
    const kv = page.items[0];
    return { holder: kv?.key === this.key ? kv : null, readAt: page.revision };
  }

  /**
   * Resolves after retryPeriod, or earlier when the holder's key is deleted. The watch starts right
   * after the read that found the holder (readAt + 1), not after the key's modRevision: a
   * long-lived leader's key was written long ago, in history compaction may have removed.
   */
  private async waitForVacancy(readAt: number, signal: AbortSignal): Promise<void> {
    const vacated = new AbortController();
    const onStop = () => vacated.abort();
    signal.addEventListener("abort", onStop, { once: true });
    let watch: WatchLike | undefined;
    try {
      watch = this.store.watch(this.key, readAt + 1, {
        onEvents: (events) => {
          if (events.some((ev) => ev.kv.key === this.key && ev.type === "delete")) vacated.abort();
        },
        // A broken watch may have missed the delete: read the key once more (once, so that a
        // watch that always fails cannot turn this into a busy loop); the retry timer covers the rest.
        onError: () => {
          this.call(this.readLeaderKey(), "read leader key", vacated.signal).then(
            ({ holder }) => {
              if (!holder) vacated.abort();
            },
            () => {},
          );
        },
      });
    } catch (e) {
      this.log.debug({ err: e }, "could not watch the leader key; relying on the retry period");
    }
    await this.clock.sleep(this.retryPeriodMs, vacated.signal).catch(() => {});
    signal.removeEventListener("abort", onStop);
    watch?.close().catch(() => {});
  }

  /**
   * Hold leadership until it is lost (resolves with the reason) or stop() is called (resolves
   * undefined, leaving the term for stop() to release).
   */
  private lead(term: Term, signal: AbortSignal): Promise<string | undefined> {
    this.term = term;
    this.current = "leading";
    this.status.set({ name: this.name }, 1);
    const leaderAbort = new AbortController();
    this.leaderAbort = leaderAbort;
    try {
      this.callbacks?.onStartedLeading(leaderAbort.signal);
    } catch (e) {
      this.log.error({ err: e }, "onStartedLeading threw");
    }
    return new Promise<string | undefined>((resolve) => {
      let done = false;
      let deadlineTimer = this.armDeadline(term, () => stepDown(`no successful renewal for ${this.renewDeadlineMs} ms`));
      const renewAbort = new AbortController();
      const finish = (reason: string | undefined) => {
        if (done) return;
        done = true;
        deadlineTimer.cancel();
        renewAbort.abort();
        signal.removeEventListener("abort", onStop);
        resolve(reason);
      };
      const stepDown = (reason: string) => {
        if (done) return;
        this.log.warn({ reason }, "stepping down");
        this.endTerm(new LeadershipLostError(reason));
        finish(reason);
      };
      const onStop = () => finish(undefined);
      signal.addEventListener("abort", onStop, { once: true });

      const renewLoop = async () => {
        while (!done) {
          await this.clock.sleep(this.renewIntervalMs, renewAbort.signal).catch(() => {});
          while (!done) {
            const sentAt = this.clock.now();
            try {
              await this.renew(term, renewAbort.signal);
              if (done) return;
              term.renewSentAt = sentAt;
              deadlineTimer.cancel();
              deadlineTimer = this.armDeadline(term, () => stepDown(`no successful renewal for ${this.renewDeadlineMs} ms`));
              break;
            } catch (e) {
              if (done) return;
              if (e instanceof LeadershipLostError) return stepDown(e.message);
              if (isLeaseLostError(e)) return stepDown("lease expired or revoked");
              this.log.warn({ err: e }, "renewal failed; retrying");
              await this.clock.sleep(this.retryPeriodMs, renewAbort.signal).catch(() => {});
            }
          }
        }
      };
      void renewLoop();
    });
  }

  /** One renewal: keep the lease alive and check that the key is still the one we created. */
  private async renew(term: Term, signal: AbortSignal): Promise<void> {
    const budget = Math.min(this.renewIntervalMs, this.renewDeadlineMs);
    await this.call(term.lease.keepAliveOnce(), "lease keep-alive", signal, budget);
    const kv = await this.call(this.store.get(this.key), "get leader key", signal, budget);
    if (!kv || kv.createRevision !== term.fence.createRevision) {
      throw new LeadershipLostError(kv ? `leader key re-created by ${kv.value}` : "leader key deleted");
    }
  }

  private armDeadline(term: Term, onExpired: () => void) {
    const remaining = term.renewSentAt + this.renewDeadlineMs - this.clock.now();
    return this.clock.setTimer(remaining, onExpired);
  }

  /** Forget the term: the fence goes first, so no write can start under it after this. */
  private endTerm(reason: Error = new Error("leadership released")): void {
    this.term = undefined;
    this.status.set({ name: this.name }, 0);
    this.current = this.recampaign ? "following" : "stopped";
    this.leaderAbort?.abort(reason);
    this.leaderAbort = undefined;
  }

  /** Revoke a term's lease (its key vanishes with it), giving up after retryPeriod. */
  private async revoke(lease: LeaseLike): Promise<void> {
    try {
      await withDeadline(lease.revoke(), this.retryPeriodMs, this.clock, "lease revoke");
      this.log.info("leadership released (lease revoked)");
    } catch (e) {
      this.log.warn({ err: e }, "could not revoke the lease; it expires after its TTL");
    }
  }

  private async notifyStopped(info: StoppedLeading): Promise<void> {
    try {
      await this.callbacks?.onStoppedLeading(info);
    } catch (e) {
      this.log.error({ err: e }, "onStoppedLeading threw");
    }
  }

  private async dropPendingLease(): Promise<void> {
    const pending = this.pendingLease;
    if (!pending) return;
    this.pendingLease = undefined;
    await withDeadline(pending.lease.revoke(), this.retryPeriodMs, this.clock, "lease revoke").catch(() => {});
  }

  private call<T>(p: Promise<T>, what: string, signal: AbortSignal, ms = this.retryPeriodMs * 2): Promise<T> {
    return withDeadline(p, ms, this.clock, what, signal);
  }
}
