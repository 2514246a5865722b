// One garbage collection run (docs/registry-gc.md): mark, delete untagged manifests when asked,
// then sweep unreferenced blobs through the quarantine, while the registry goes on serving.
//
// THE INVARIANT: a blob (or manifest revision) that a successful request made something depend on
// is never deleted. The argument:
//   1. Every request that is about to make something depend on digest D (upload commit, mount,
//      manifest PUT for D and each digest it references, a blob HEAD about to answer 200) first
//      writes a touch of D to the store, then checks that D exists (gc-journal.ts). A manifest,
//      tag or referrer change writes its repository's dirty key first.
//   2. The collector removes D only if no mark keeps it and no touch of D is newer than the
//      cut-off (run start - grace - touch resolution - clock allowance). It acts first (moves the
//      blob to quarantine, unlinks the revision), THEN reads the touches again from the store
//      (a linearizable read, after the act). A touch written since its first read (a higher
//      modRevision) or newer than the cut-off undoes the act (move back, link again).
//   3. So a request whose check in 1 saw D before the act has a touch the re-read in 2 sees, and
//      D is restored; a request whose check came after the act finds D in quarantine and moves
//      it back itself (blobs.ts), or finds it gone for good and fails (MANIFEST_BLOB_UNKNOWN, a
//      refused push, never a broken image). A move is atomic on a filesystem; on S3 the final
//      delete re-checks that blobs/D is absent before it unlinks `_layers`, and links again if a
//      rescue copied it back meanwhile.
//   4. Marks are never older than what they protect: a repository's mark is replaced only by a
//      newer read of storage, and its dirty key is cleared only with a compare on the revision
//      read before that storage read, so a change after the read leaves the key set and the next
//      run reads the repository again. Between runs, new references are protected by 1-2.
//   5. The grace covers what no touch can: a client that HEADs a blob, then uploads for a long
//      time before it PUTs the manifest. Grace 0 is for a registry known to be idle.
// Crash safety: every step is idempotent. Candidates are written as pending records before the
// marks that dropped them are stored; a blob left in quarantine by a crash is found by the next
// run, which rescues it if anything keeps or touched it, and deletes it otherwise.
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import { PathNotFoundError } from "../../adapters/blobstore/driver.ts";
import type { KeyValue, Op, Store } from "../../adapters/store/store.ts";
import { listAll } from "../../adapters/store/list-all.ts";
import { gcKeys, touchResolutionMs, unfinishedTagTouchMs } from "../../api/resources/registry-gc.ts";
import { digestOrUndefined, isRepositoryName, type Digest } from "../../api/resources/registry-names.ts";
import { Links, listRepositories } from "../../api/resources/registry-storage.ts";
import { InUse } from "./in-use.ts";
import * as paths from "../../api/resources/registry-paths.ts";
import type { Logger } from "../../runtime/log.ts";
import { mapLimit } from "../../runtime/map-limit.ts";
import type { InUseLookup } from "./retention.ts";
import { tagsToRemove, type TagInfo } from "./retention.ts";
import type { GcPolicy } from "./policy.ts";
import { repositoryMatches } from "./policy.ts";
import { digestsUnder, keptDigests, markRepository, untaggedToDelete, type RepositoryMark } from "./mark.ts";
import { ReferenceIndex } from "./reference-index.ts";

/** Clocks of registry processes may differ by this much; a touch counts as that much newer. */
export const clockAllowanceMs = 1_000;

export interface CollectOptions {
  driver: StorageDriver;
  /** Reads (linearizable) and the leader's writes (a fenced store in the controller). */
  store: Store;
  /** "full": read every repository and list every blob; "incremental": what changed since the last run. */
  mode: "full" | "incremental";
  dryRun: boolean;
  /** Remove manifests that no tag points at (and nothing kept needs) once untagged for untaggedGraceMs. */
  deleteUntagged: boolean;
  /** Default: graceMs. */
  untaggedGraceMs?: number;
  graceMs: number;
  /** The marks kept between runs (the controller keeps one per leadership term). */
  state?: CollectorState;
  log?: Logger;
  now?: () => number;
  signal?: AbortSignal;
  onProgress?: (p: GcProgress) => void;
  /** Storage calls at once (default 16). */
  concurrency?: number;
  /** Called between store transactions of many writes (the paced runs of a serving registry). */
  pace?: () => Promise<void>;
  /** A policy's retention rules, applied before the mark (tags removed, then collected as usual). */
  retention?: { policy: GcPolicy; inUse: InUseLookup };
  /** What workloads use: with deleteUntagged, an untagged manifest a workload names by digest stays (default: read from the store). */
  inUse?: InUseLookup;
}

export interface GcProgress {
  phase: "mark" | "untagged" | "candidates" | "sweep" | "done";
  done: number;
  total: number;
}

export interface GcReport {
  mode: "full" | "incremental";
  dryRun: boolean;
  startedAt: string;
  durationMs: number;
  graceMs: number;
  /** Repositories known after the run, and how many were read from storage. */
  repositories: number;
  repositoriesMarked: number;
  manifests: number;
  blobsMarked: number;
  candidates: number;
  /** Blobs deleted (or, in a dry run, that would be), with bytes. */
  blobsDeleted: number;
  bytesDeleted: number;
  deleted: { digest: string; size: number }[];
  manifestsDeleted: { repository: string; digest: string }[];
  /** Tags a retention policy removed (or, in a dry run, would). */
  tagsDeleted: { repository: string; tag: string; digest: string }[];
  /** Unreferenced, but touched or written within the grace: left for a later run. */
  pending: number;
  /** Moved to quarantine, then found touched: moved back. */
  rescued: number;
}

/** What the collector keeps between runs: the reference index, and whether it was loaded. */
export class CollectorState {
  index = new ReferenceIndex();
  loaded = false;
  /**
   * Marks newer than the store's, with the revision of the dirty key each answers. They are
   * stored (and those dirty keys cleared) every `marksSaveEveryMs`, not after every run: until
   * then the dirty keys stay set, so a registry that takes over reads those repositories again.
   */
  readonly unsaved = new Map<string, { mark: RepositoryMark; dirtyRevision: number | undefined }>();
  savedAt = 0;
  reset(): void {
    this.index = new ReferenceIndex();
    this.loaded = false;
    this.unsaved.clear();
    this.savedAt = 0;
  }
}

/** How often an incremental run stores the marks it changed (a full run always does). */
export const marksSaveEveryMs = 10_000;

/** Cap on digests listed one by one in a report (the counts are always complete). */
const reportListLimit = 1000;

export async function collect(o: CollectOptions): Promise<GcReport> {
  const now = o.now ?? Date.now;
  const t0 = now();
  const started = performance.now();
  const concurrency = o.concurrency ?? 16;
  const { driver, store } = o;
  const log = o.log;
  const state = o.state ?? new CollectorState();
  const progress = (phase: GcProgress["phase"], done: number, total: number) => o.onProgress?.({ phase, done, total });
  const check = () => o.signal?.throwIfAborted();
  const cutoff = t0 - o.graceMs - touchResolutionMs - clockAllowanceMs;
  const untaggedBefore = t0 - (o.untaggedGraceMs ?? o.graceMs);

  // A run that died (or failed) after moving blobs to quarantine left them there: everything in
  // quarantine goes back first, and is judged again below like any other blob.
  if (!o.dryRun) await restoreQuarantine(driver, store, concurrency);

  // The marks of the last runs, unless this process has them already.
  let mode = o.mode;
  if (!state.loaded) {
    const complete = (await store.get(gcKeys.marksComplete)) !== null;
    if (!complete) mode = "full";
    else await loadMarks(store, state);
  }

  // What to read from storage: dirty keys are read first, so clearing them later compares against
  // revisions from before the storage reads.
  const dirty = await listAll(store, gcKeys.dirty);
  const dirtyRevisions = new Map(dirty.items.map((kv) => [kv.key.slice(gcKeys.dirty.length), kv.modRevision]));
  let repositories: string[];
  if (mode === "full") {
    repositories = [...new Set([...(await listRepositories(driver)), ...state.index.repositoryNames()])];
  } else {
    const expiring = o.deleteUntagged ? state.index.repositoryNames().filter((r) => untaggedToDelete(state.index.markOf(r)!, untaggedBefore).length > 0) : [];
    repositories = [...new Set([...dirtyRevisions.keys(), ...expiring])];
  }
  // Retention: tags removed before the mark, so the marks see them gone.
  let tagsDeleted: TagInfo[] = [];
  if (o.retention !== undefined) {
    const known = mode === "full" ? repositories : [...new Set([...repositories, ...state.index.repositoryNames()])];
    const matching = known.filter((r) => repositoryMatches(o.retention!.policy.repositories, r));
    tagsDeleted = await applyRetention(o, matching, t0, cutoff, concurrency);
    if (!o.dryRun) repositories = [...new Set([...repositories, ...tagsDeleted.map((t) => t.repository)])];
  }
  repositories.sort();

  // Mark.
  const known = new Map<string, { refs: string[]; children: string[]; subject?: string }>();
  for (const r of state.index.repositoryNames()) {
    for (const [d, m] of Object.entries(state.index.markOf(r)!.manifests)) {
      if (!m.missing) known.set(d, { refs: m.refs, children: m.children, ...(m.subject !== undefined && { subject: m.subject }) });
    }
  }
  // Touches as they stand before the mark: the "first read" of the argument above (a touch
  // written during the mark has a later revision, and counts as racing with this run).
  let touches = await readTouches(store);
  // A tag is trusted only when its tag touch is done and no newer than the previous mark (mark.ts).
  const tagTouchRevisions = new Map((await listAll(store, gcKeys.tagTouches)).items.map((kv) => [kv.key, tagTouchDone(kv) ? kv.modRevision : Number.MAX_SAFE_INTEGER]));
  const retentionTouched = new Set(tagsDeleted.map((t) => t.repository));
  const marks = new Map<string, RepositoryMark>();
  let marked = 0;
  await mapLimit(repositories, Math.max(1, Math.floor(concurrency / 2)), async (r) => {
    check();
    marks.set(
      r,
      await markRepository(driver, r, {
        known,
        previous: state.index.markOf(r),
        now: t0,
        concurrency: 4,
        touchedAt: (d) => touches.byDigest.get(d)?.at,
        asOf: dirty.revision ?? 0,
        // An incremental run reads what changed; a full run, and a repository whose tags retention
        // just rewrote, everything.
        ...(mode === "incremental" && !retentionTouched.has(r) && { trust: { tagTouchRevision: (tag: string) => tagTouchRevisions.get(gcKeys.tagTouch(r, tag)) } }),
      }),
    );
    progress("mark", ++marked, repositories.length);
  });

  // A dry run sees the tags retention would remove as gone (a real run has removed them already).
  if (o.dryRun) {
    for (const t of tagsDeleted) {
      const mark = marks.get(t.repository) ?? state.index.markOf(t.repository);
      const m = mark?.manifests[t.digest];
      if (mark === undefined || m === undefined) continue;
      const copy: RepositoryMark = { ...mark, manifests: { ...mark.manifests, [t.digest]: { ...m, tags: m.tags.filter((x) => x !== t.tag) } } };
      if (copy.manifests[t.digest]!.tags.length === 0) copy.manifests[t.digest]!.untaggedSince ??= t0;
      marks.set(t.repository, copy);
    }
  }


  // Untagged manifests.
  const manifestsDeleted: { repository: string; digest: string }[] = [];
  if (o.deleteUntagged) {
    const inUse = o.inUse ?? o.retention?.inUse ?? (await InUse.read(store));
    const links = new Links(driver); // no journal: the collector updates the marks itself
    for (const [r, mark] of marks) {
      for (const d of untaggedToDelete(mark, untaggedBefore, (digest) => inUse.usedBy(r, "", digest) !== undefined)) {
        if (touchedSince(touches.byDigest.get(d), cutoff, touches.revision)) continue;
        const digest = digestOrUndefined(d)!;
        const m = mark.manifests[d]!;
        if (!o.dryRun) {
          const subject = m.subject !== undefined ? digestOrUndefined(m.subject) : undefined;
          if (subject !== undefined) await links.unlinkReferrer(r, subject, digest);
          await links.unlinkRevision(r, digest);
          const again = await store.get(gcKeys.touch(d));
          if (touchedSince(again === null ? undefined : touchOf(again), cutoff, touches.revision)) {
            await links.linkRevision(r, digest);
            if (subject !== undefined) await links.linkReferrer(r, subject, digest);
            continue;
          }
        }
        delete mark.manifests[d];
        manifestsDeleted.push({ repository: r, digest: d });
      }
    }
    progress("untagged", manifestsDeleted.length, manifestsDeleted.length);
  }

  // The new marks replace the old ones; what no repository keeps any more is a candidate.
  const dropped = new Set<string>();
  const index = o.dryRun ? cloneIndex(state.index) : state.index;
  for (const [r, mark] of marks) {
    const gone = Object.keys(mark.manifests).length === 0 && mark.layers.length === 0;
    for (const d of index.set(r, gone ? undefined : mark)) dropped.add(d);
  }
  check();

  // Candidates: the dropped, the pending of earlier runs, the touched, what sits in quarantine,
  // and on a full run every stored blob.
  const pending = await listAll(store, gcKeys.pending);
  const candidates = new Set<string>(dropped);
  for (const kv of pending.items) candidates.add(kv.key.slice(gcKeys.pending.length));
  for (const d of touches.byDigest.keys()) candidates.add(d);
  if (mode === "full") for (const d of await listBlobs(driver, concurrency)) candidates.add(d.value);
  const unkept = [...candidates].filter((d) => !index.isKept(d) && digestOrUndefined(d) !== undefined).sort();
  progress("candidates", unkept.length, unkept.length);

  // Decide: touched or written within the grace stays pending; the rest is swept.
  const sweep: SweepEntry[] = [];
  const keepPending: string[] = [];
  /** Candidates with nothing stored (a touch of a refused push, an emptied directory). */
  const absent = new Set<string>();
  await mapLimit(unkept, concurrency, async (d) => {
    const digest = digestOrUndefined(d)!;
    if (touchedSince(touches.byDigest.get(d), cutoff, touches.revision)) return void keepPending.push(d);
    let info;
    try {
      info = await driver.stat(paths.blobData(digest));
    } catch (err) {
      if (err instanceof PathNotFoundError) return void absent.add(d);
      throw err;
    }
    if (info.isDir) return void absent.add(d);
    if (info.modTime.getTime() > t0 - o.graceMs - clockAllowanceMs) return void keepPending.push(d);
    sweep.push({ digest, size: info.size });
  });
  sweep.sort((a, b) => (a.digest.value < b.digest.value ? -1 : 1));

  let rescued = 0;
  let deleted = sweep;
  if (!o.dryRun) {
    // Pending records of every candidate first (those to sweep too), then the marks: a candidate
    // the stored marks no longer keep is never only in memory, whatever fails later.
    // A blob to sweep also records the repositories whose links the sweep removes, so a run that
    // dies before it decides can link them again (restoreQuarantine).
    const pendingNow = new Set(pending.items.map((kv) => kv.key.slice(gcKeys.pending.length)));
    for (const b of sweep) {
      const touchedIn = touches.byDigest.get(b.digest.value)?.repository;
      b.unlink = [...new Set([...index.linkingRepositories(b.digest.value), ...(touchedIn !== undefined && isRepositoryName(touchedIn) ? [touchedIn] : [])])].sort();
    }
    await writeAll(
      store,
      [
      ...keepPending.filter((d) => !pendingNow.has(d)).map((d): Op => ({ type: "put", key: gcKeys.pendingOf(d), value: JSON.stringify({ since: t0 } satisfies PendingRecord) })),
      ...sweep.map((b): Op => ({ type: "put", key: gcKeys.pendingOf(b.digest.value), value: JSON.stringify({ since: t0, unlink: b.unlink } satisfies PendingRecord) })),
      ],
      o.pace,
    );
    for (const [r, mark] of marks) state.unsaved.set(r, { mark, dirtyRevision: dirtyRevisions.get(r) });
    // Stored at once when this run changed storage itself, or read a repository no dirty key
    // names (retention, untagged deletions): nothing would make a successor read it again.
    const undirtied = [...marks.keys()].some((r) => !dirtyRevisions.has(r));
    if (mode === "full" || undirtied || manifestsDeleted.length > 0 || tagsDeleted.length > 0 || t0 - state.savedAt >= marksSaveEveryMs || state.unsaved.size > 1000) {
      await saveMarks(store, state, mode === "full", t0, o.pace);
    }
    check();
    ({ deleted, rescued } = await sweepBlobs(o, sweep, touches, cutoff, index, concurrency, (n) => progress("sweep", n, sweep.length)));
    // Housekeeping: pending records of what is kept or gone; touches older than any cut-off of
    // digests kept, deleted or not stored; tag touches older than the cut-off.
    // Digests only the unsaved marks keep: a successor loading the stored marks would not know
    // they were kept, so their touches and pending records stay until the marks are stored.
    const unsavedKept = new Set<string>();
    for (const { mark } of state.unsaved.values()) for (const d of keptDigests(mark)) unsavedKept.add(d);
    const keepSet = new Set([...keepPending, ...sweep.map((b) => b.digest.value), ...[...pendingNow].filter((d) => unsavedKept.has(d))]);
    const deletedSet = new Set(deleted.map((b) => b.digest.value));
    for (const d of deletedSet) keepSet.delete(d);
    await writeAll(store, [...pendingNow, ...sweep.map((b) => b.digest.value)].filter((d) => !keepSet.has(d)).map((d) => ({ type: "delete", key: gcKeys.pendingOf(d) })), o.pace);
    touches = await readTouches(store);
    const stale = [...touches.kvs.values()].filter((kv) => {
      const d = kv.key.slice(gcKeys.touches.length);
      return deletedSet.has(d) || (!touchedSince(touchOf(kv), cutoff, touches.revision) && ((index.isKept(d) && !unsavedKept.has(d)) || absent.has(d)));
    });
    // A tag touch goes only once the stored mark of its repository is newer: a successor that
    // loads that mark trusts its tags unless a tag touch says otherwise (mark.ts).
    const tagTouches = await listAll(store, gcKeys.tagTouches);
    // One not done (a push in flight, or one that died) stays until no push could still be going.
    // A repository with no mark at all is read in full by its next mark: its tag touches can go.
    for (const kv of tagTouches.items) {
      const r = kv.key.slice(gcKeys.tagTouches.length, kv.key.lastIndexOf("/"));
      if (state.unsaved.has(r)) continue;
      const mark = state.index.markOf(r);
      const { at } = touchOf(kv);
      const old = tagTouchDone(kv) ? at <= cutoff : at <= t0 - unfinishedTagTouchMs;
      if (old && (mark === undefined || kv.modRevision < (mark.asOf ?? 0))) stale.push(kv);
    }
    await deleteUnchanged(store, stale);
  }
  progress("done", deleted.length, sweep.length);

  let manifests = 0;
  for (const r of index.repositoryNames()) manifests += Object.keys(index.markOf(r)!.manifests).length;
  const report: GcReport = {
    mode,
    dryRun: o.dryRun,
    startedAt: new Date(t0).toISOString(),
    durationMs: performance.now() - started,
    graceMs: o.graceMs,
    repositories: index.repositories,
    repositoriesMarked: repositories.length,
    manifests,
    blobsMarked: index.size,
    candidates: unkept.length,
    blobsDeleted: deleted.length,
    bytesDeleted: deleted.reduce((s, b) => s + b.size, 0),
    deleted: deleted.slice(0, reportListLimit).map((b) => ({ digest: b.digest.value, size: b.size })),
    manifestsDeleted: manifestsDeleted.slice(0, reportListLimit),
    tagsDeleted: tagsDeleted.slice(0, reportListLimit).map(({ repository, tag, digest }) => ({ repository, tag, digest })),
    pending: keepPending.length,
    rescued,
  };
  log?.info({ ...report, deleted: undefined, manifestsDeleted: manifestsDeleted.length, tagsDeleted: tagsDeleted.length }, o.dryRun ? "garbage collection dry run done" : "garbage collection done");
  return report;
}

// ---- retention

/**
 * Remove the tags the policy's rules select (retention.ts decides). A tag pushed again since the
 * cut-off, or since the tag touches were read, stays; one re-pointed while it was being removed
 * is pointed again at what the push wrote (its tag touch names the digest).
 */
async function applyRetention(o: CollectOptions, repositories: string[], now: number, cutoff: number, concurrency: number): Promise<TagInfo[]> {
  const { driver, store } = o;
  const { policy, inUse } = o.retention!;
  const links = new Links(driver);
  const tags: TagInfo[] = [];
  await mapLimit(repositories, concurrency, async (repository) => {
    for (const tag of (await links.listTags(repository)) ?? []) {
      const digest = await links.readTag(repository, tag);
      if (digest === undefined) continue;
      let pushedAt: number;
      try {
        pushedAt = (await driver.stat(paths.tagCurrentLink(repository, tag))).modTime.getTime();
      } catch (err) {
        if (err instanceof PathNotFoundError) continue;
        throw err;
      }
      tags.push({ repository, tag, digest: digest.value, pushedAt });
    }
  });
  const decision = tagsToRemove(policy, tags, inUse, now);
  if (o.dryRun) return decision.remove;
  const { items, revision } = await listAll(store, gcKeys.tagTouches);
  const since = revision ?? (await store.revision());
  const touched = new Map(items.map((kv) => [kv.key, kv]));
  const removed: TagInfo[] = [];
  for (const t of decision.remove) {
    const key = gcKeys.tagTouch(t.repository, t.tag);
    const before = touched.get(key);
    if (before !== undefined && touchedSince(touchOf(before), cutoff, since)) continue;
    if ((await links.readTag(t.repository, t.tag))?.value !== t.digest) continue; // pushed again meanwhile
    // Dirty first: if this run dies before its marks are stored, the next one reads the repository.
    await store.put(gcKeys.dirtyOf(t.repository), JSON.stringify({ at: now }));
    await links.untag(t.repository, t.tag);
    const after = await store.get(key);
    if (after !== null && after.modRevision > since) {
      // A push of this tag raced with the removal: it wins.
      // Only at a manifest the repository has: a push still in flight writes its tag itself, and
      // one that failed must not leave a tag pointing at nothing.
      const pushed = digestOrUndefined((JSON.parse(after.value) as { digest?: string }).digest ?? "");
      if (pushed !== undefined && (await links.readRevisionLink(t.repository, pushed)) !== undefined) await links.tag(t.repository, t.tag, pushed);
      continue;
    }
    removed.push(t);
  }
  return removed;
}

// ---- the sweep

/**
 * Move each blob to quarantine and unlink it from the repositories that link it; re-read the
 * touches; move back (and link again) what was touched since the first read or is kept after all;
 * delete the rest for good. Links go before the re-read, so a request that touched a blob after the
 * re-read finds either no link or no bytes, and fails cleanly (the argument at the top of the file;
 * on S3 a rescue's copy is not atomic with this delete).
 */
async function sweepBlobs(
  o: CollectOptions,
  sweep: SweepEntry[],
  first: Touches,
  cutoff: number,
  index: ReferenceIndex,
  concurrency: number,
  progress: (n: number) => void,
): Promise<{ deleted: SweepEntry[]; rescued: number }> {
  const { driver, store } = o;
  const links = new Links(driver);
  const moved: { blob: SweepEntry; unlinked: string[] }[] = [];
  await mapLimit(sweep, concurrency, async (b) => {
    o.signal?.throwIfAborted();
    try {
      await driver.move(paths.blobData(b.digest), paths.quarantineData(b.digest));
    } catch (err) {
      if (err instanceof PathNotFoundError) return; // deleted or moved by someone else meanwhile
      throw err;
    }
    const entry = { blob: b, unlinked: [] as string[] };
    moved.push(entry);
    // Its pending record names these repositories: a run that dies from here on links them again.
    for (const r of b.unlink ?? []) if (await links.unlinkBlob(r, b.digest)) entry.unlinked.push(r);
  });
  // The re-read after the act (the invariant's step 2).
  const after = await readTouches(store);
  const deleted: SweepEntry[] = [];
  let rescued = 0;
  await mapLimit(moved, concurrency, async ({ blob: b, unlinked }) => {
    if (touchedSince(after.byDigest.get(b.digest.value), cutoff, first.revision) || index.isKept(b.digest.value)) {
      try {
        await driver.move(paths.quarantineData(b.digest), paths.blobData(b.digest));
      } catch (err) {
        if (!(err instanceof PathNotFoundError)) throw err; // a request moved it back already
      }
      for (const r of unlinked) await links.linkBlob(r, b.digest);
      rescued++;
      return;
    }
    deleted.push(b);
  });
  // In batches: S3 takes 1,000 keys a request, and a paced driver rests between calls.
  for (let i = 0; i < deleted.length; i += 500) {
    o.signal?.throwIfAborted();
    await driver.deleteMany(deleted.slice(i, i + 500).map((b) => paths.quarantineData(b.digest)));
  }
  progress(deleted.length);
  return { deleted, rescued };
}

/**
 * Move everything in quarantine back, and link it again where its pending record says the sweep
 * unlinked it: a run that died or failed after moving left it there.
 */
async function restoreQuarantine(driver: StorageDriver, store: Store, concurrency: number): Promise<void> {
  const quarantined = await digestsUnder(driver, `${paths.root}/_quarantine`);
  const links = new Links(driver);
  await mapLimit(quarantined, concurrency, async (d) => {
    try {
      await driver.move(paths.quarantineData(d), paths.blobData(d));
    } catch (err) {
      if (!(err instanceof PathNotFoundError)) throw err;
    }
    await driver.deleteMany([paths.quarantineData(d)]); // an emptied directory (filesystem)
    const kv = await store.get(gcKeys.pendingOf(d.value));
    for (const r of kv === null ? [] : pendingOf(kv).unlink ?? []) if (isRepositoryName(r)) await links.linkBlob(r, d);
  });
}

/** `pending/<digest>`: an unreferenced blob a later run looks at again. */
interface PendingRecord {
  since: number;
  /** Repositories whose links of the blob a sweep removes (set before it starts). */
  unlink?: string[];
}

function pendingOf(kv: KeyValue): PendingRecord {
  try {
    const v = JSON.parse(kv.value) as PendingRecord;
    return { since: typeof v.since === "number" ? v.since : 0, ...(Array.isArray(v.unlink) && { unlink: v.unlink.filter((r) => typeof r === "string") }) };
  } catch {
    return { since: 0 };
  }
}

interface SweepEntry {
  digest: Digest;
  size: number;
  /** Repositories to unlink it from (decided before the pending records are written). */
  unlink?: string[];
}

// ---- store state

interface Touch {
  at: number;
  modRevision: number;
  /** The repository an upload or mount linked the blob into. */
  repository?: string;
}

interface Touches {
  byDigest: Map<string, Touch>;
  kvs: Map<string, KeyValue>;
  revision: number;
}

async function readTouches(store: Store): Promise<Touches> {
  const { items, revision } = await listAll(store, gcKeys.touches);
  const byDigest = new Map<string, Touch>();
  const kvs = new Map<string, KeyValue>();
  for (const kv of items) {
    byDigest.set(kv.key.slice(gcKeys.touches.length), touchOf(kv));
    kvs.set(kv.key, kv);
  }
  return { byDigest, kvs, revision: revision ?? (await store.revision()) };
}

/** Whether a tag touch says its push finished (written after the tag). */
function tagTouchDone(kv: KeyValue): boolean {
  try {
    return (JSON.parse(kv.value) as { done?: unknown }).done === true;
  } catch {
    return false;
  }
}

function touchOf(kv: KeyValue): Touch {
  let at = Number.POSITIVE_INFINITY; // unreadable: as if touched now (never a reason to delete)
  let repository: string | undefined;
  try {
    const v = JSON.parse(kv.value) as { at?: unknown; repository?: unknown };
    if (typeof v.at === "number" && Number.isFinite(v.at)) at = v.at;
    if (typeof v.repository === "string") repository = v.repository;
  } catch {
    // kept as "touched"
  }
  return { at, modRevision: kv.modRevision, ...(repository !== undefined && { repository }) };
}

/** Touched after the cut-off, or written after revision `since` (a request raced with this run). */
function touchedSince(t: Touch | undefined, cutoff: number, since: number): boolean {
  return t !== undefined && (t.at > cutoff || t.modRevision > since);
}

async function loadMarks(store: Store, state: CollectorState): Promise<void> {
  const { items } = await listAll(store, gcKeys.marks);
  for (const kv of items) {
    const repository = kv.key.slice(gcKeys.marks.length);
    try {
      state.index.set(repository, JSON.parse(kv.value) as RepositoryMark);
    } catch {
      // An unreadable mark: the repository is read again (marked dirty).
      await store.put(gcKeys.dirtyOf(repository), JSON.stringify({ at: Date.now() }));
    }
  }
  state.loaded = true;
}

/** Store the unsaved marks, then clear the dirty keys they answer (only those not written since). */
async function saveMarks(store: Store, state: CollectorState, complete: boolean, now: number, pace?: () => Promise<void>): Promise<void> {
  const ops: Op[] = [];
  for (const [r, { mark }] of state.unsaved) {
    const gone = Object.keys(mark.manifests).length === 0 && mark.layers.length === 0;
    ops.push(gone ? { type: "delete", key: gcKeys.markOf(r) } : { type: "put", key: gcKeys.markOf(r), value: JSON.stringify(mark) });
  }
  if (complete) ops.push({ type: "put", key: gcKeys.marksComplete, value: JSON.stringify({ at: now }) });
  await writeAll(store, ops, pace);
  state.loaded = true;
  const answered = [...state.unsaved].filter(([, u]) => u.dirtyRevision !== undefined);
  state.unsaved.clear();
  state.savedAt = now;
  for (const [r, { dirtyRevision }] of answered) {
    await store.delete(gcKeys.dirtyOf(r), { expect: [{ key: gcKeys.dirtyOf(r), target: "modRevision", equals: dirtyRevision! }] });
  }
}

/**
 * Delete each key unless it was written since it was read: 50 at a time in one transaction with a
 * compare each; a batch whose compares do not all hold is done key by key.
 */
async function deleteUnchanged(store: Store, kvs: KeyValue[]): Promise<void> {
  for (let i = 0; i < kvs.length; i += 50) {
    const batch = kvs.slice(i, i + 50);
    const compares = batch.map((kv) => ({ key: kv.key, target: "modRevision" as const, equals: kv.modRevision }));
    if ((await store.txn(compares, batch.map((kv) => ({ type: "delete" as const, key: kv.key })))).succeeded) continue;
    for (const kv of batch) await store.delete(kv.key, { expect: [{ key: kv.key, target: "modRevision", equals: kv.modRevision }] });
  }
}

/** Writes in transactions of at most 100 operations (etcd allows 128 by default). */
async function writeAll(store: Store, ops: Op[], pace?: () => Promise<void>): Promise<void> {
  // Smaller transactions when paced: an embedded store commits on the event loop.
  const size = pace === undefined ? 100 : 20;
  for (let i = 0; i < ops.length; i += size) {
    await pace?.();
    await store.txn([], ops.slice(i, i + size));
  }
}

function cloneIndex(index: ReferenceIndex): ReferenceIndex {
  const copy = new ReferenceIndex();
  for (const r of index.repositoryNames()) copy.set(r, index.markOf(r));
  return copy;
}

// ---- storage

/** Every blob under blobs/: the 256 prefixes of each algorithm listed in parallel. */
export async function listBlobs(driver: StorageDriver, concurrency: number): Promise<Digest[]> {
  const out: Digest[] = [];
  const root = `${paths.root}/blobs`;
  for (const alg of await childrenOf(driver, root)) {
    const prefixes = await childrenOf(driver, `${root}/${alg}`);
    const lists = await mapLimit(prefixes, concurrency, (p) => childrenOf(driver, `${root}/${alg}/${p}`));
    for (const hexes of lists) for (const hex of hexes) {
      const d = digestOrUndefined(`${alg}:${hex}`);
      if (d !== undefined) out.push(d);
    }
  }
  return out;
}

async function childrenOf(driver: StorageDriver, dir: string): Promise<string[]> {
  try {
    return (await driver.list(dir)).map((p) => p.slice(p.lastIndexOf("/") + 1));
  } catch (err) {
    if (err instanceof PathNotFoundError) return [];
    throw err;
  }
}
