// What the serving registry tells the garbage collector (docs/registry-gc.md, "Why nothing is
// lost"): touches and changed repositories, written to the platform store under
// /platform/registry/gc/ BEFORE the request acts, so the collector, which re-reads them after each
// removal, can always tell that a request raced with it.
//
//   touch/<alg>:<hex>            {"at": ms}                  a request is about to rely on this digest
//   tag-touch/<repository>/<tag> {"at": ms, "digest": d}     a manifest PUT is about to point <tag> at d
//   dirty/<repository>           {"at": ms}                  a manifest, tag or referrer link is about to change
//
// Touches: upload commit, cross-repository mount, a blob HEAD or GET that is about to answer 200,
// and a manifest PUT (for every digest it references and its own). A touch is written at most once
// per `touchResolutionMs` per digest by one process; the collector counts a touch as lasting that
// long, so skipping the write never makes a touch look older than it is.
//
// Dirty repositories: the collector's incremental runs re-read only these (their marks are kept
// in the store); a change to a repository after its mark was read is always followed by a dirty
// write the collector sees, because the write comes first and the collector clears the key only
// with a compare on the revision it read.
import type { Op, Store } from "../../adapters/store/store.ts";
import { gcKeys, touchResolutionMs, type TagTouchRecord, type TouchRecord } from "../resources/registry-gc.ts";

/** The serving side of garbage collection. Each call resolves once the record is durable. */
export interface GcJournal {
  /** Requests are about to rely on these digests existing (and link them into `repository`, when given). */
  touch(digests: readonly string[], repository?: string): Promise<void>;
  /**
   * A manifest, tag or referrer link of `repository` is about to change; with it, in the same
   * write, the digests the change relies on and the tags it points (a manifest PUT).
   */
  changing(repository: string, relies?: { digests?: readonly string[]; tags?: readonly { tag: string; digest: string }[] }): Promise<number | undefined>;
  /**
   * The change is done. Written again after the change so a collector that read the dirty key
   * between the two writes, and storage before the change landed, cannot clear it (collector.ts);
   * the tag touches are written again too, after the tags: a collector that trusts the tags of its
   * last mark re-reads every tag touched after that mark's read of the dirty keys (mark.ts).
   */
  changed(repository: string, tags?: readonly { tag: string; digest: string }[], since?: number): Promise<void>;
}

/** No collector: nothing to tell (a registry without a store, and unit tests). */
export const noJournal: GcJournal = {
  touch: async () => {},
  changing: async () => undefined,
  changed: async () => {},
};

/** The journal in the platform store. */
export class StoreGcJournal implements GcJournal {
  /** When this process last wrote a touch of each digest (ms). Pruned as it grows. */
  private readonly written = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
  ) {}

  async touch(digests: readonly string[], repository?: string): Promise<void> {
    const now = this.now();
    // A touch that links into a repository is always written (the collector needs the repository).
    const due = repository === undefined ? this.due(digests, now) : [...new Set(digests)];
    if (due.length === 0) return;
    await this.write(due.map((d) => this.touchOp(d, now, repository)));
    this.remember(due, now);
  }

  /** Answers the revision of the tag touches' write (undefined without tags), for changed(). */
  async changing(repository: string, relies: { digests?: readonly string[]; tags?: readonly { tag: string; digest: string }[] } = {}): Promise<number | undefined> {
    const now = this.now();
    // Every digest is written here, deduplicated or not: one transaction either way.
    const digests = [...new Set(relies.digests ?? [])];
    const tags = (relies.tags ?? []).slice(0, 100);
    await this.write([{ type: "put", key: gcKeys.dirtyOf(repository), value: JSON.stringify({ at: now }) }, ...digests.map((d) => this.touchOp(d, now))]);
    this.remember(digests, now);
    if (tags.length === 0) return undefined;
    const r = await this.store.txn([], tags.map(({ tag, digest }) => this.tagTouchOp(repository, tag, digest, now, false)));
    return r.revision;
  }

  /**
   * The tag touches become done only while they are still this push's (`since`, changing()'s
   * revision): a concurrent push of the same tag keeps its touch not done until its own end.
   */
  async changed(repository: string, tags: readonly { tag: string; digest: string }[] = [], since?: number): Promise<void> {
    const now = this.now();
    const dirty: Op = { type: "put", key: gcKeys.dirtyOf(repository), value: JSON.stringify({ at: now }) };
    const mine = since === undefined ? [] : tags.slice(0, 100);
    await this.store.txn(
      mine.map(({ tag }) => ({ key: gcKeys.tagTouch(repository, tag), target: "modRevision" as const, equals: since! })),
      [dirty, ...mine.map(({ tag, digest }) => this.tagTouchOp(repository, tag, digest, now, true))],
      [dirty],
    );
  }

  private tagTouchOp(repository: string, tag: string, digest: string, now: number, done: boolean): Op {
    return { type: "put", key: gcKeys.tagTouch(repository, tag), value: JSON.stringify({ at: now, digest, done } satisfies TagTouchRecord) };
  }

  private touchOp(digest: string, now: number, repository?: string): Op {
    return { type: "put", key: gcKeys.touch(digest), value: JSON.stringify({ at: now, ...(repository !== undefined && { repository }) } satisfies TouchRecord) };
  }

  private due(digests: readonly string[], now: number): string[] {
    return [...new Set(digests)].filter((d) => {
      const last = this.written.get(d);
      return last === undefined || now - last >= touchResolutionMs;
    });
  }

  private remember(digests: readonly string[], now: number): void {
    if (this.written.size > 100_000) for (const [d, at] of this.written) if (now - at >= touchResolutionMs) this.written.delete(d);
    for (const d of digests) this.written.set(d, now);
  }

  /** etcd allows 128 operations in one transaction by default. */
  private async write(ops: Op[]): Promise<void> {
    for (let i = 0; i < ops.length; i += 100) await this.store.txn([], ops.slice(i, i + 100));
  }
}
