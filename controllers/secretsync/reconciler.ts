// SecretSyncReconciler: two kinds of keys, level-triggered, each correct at any time and any
// number of times.
//
//   group/<podGroup>   every live container of the group holds the secret files its container
//                      spec lists, and its marker says so (or says why not). Reads: the spec
//                      (informer), the containers (ContainerCache), the markers (informer), the
//                      proc's decrypted records (readSecrets). Writes: the containers' files
//                      (putArchive), the markers.
//   marker/<id>        garbage collection: a marker whose container no longer exists is deleted.
//
// Invariants:
// - S1 nothing is read or installed while the vault is sealed; the unseal notification enqueues
//   every group again (index.ts), so nothing waits for a periodic pass.
// - S2 a marker without error is written only after its files were uploaded to that container;
//   the PodGroup controller starts the container on seeing it, so the process never starts before
//   its files are in place.
// - S3 an upload is skipped when the marker already records the same digests for the same paths
//   (idempotence); a changed content or mode changes the digest and reinstalls, running
//   containers included.
// - S4 a marker is deleted only when its container is gone from the cache, which keeps the
//   containers of an unreachable node (ContainerCache I4): "unknown" is never taken for "gone".
// - S5 a file this controller put into a container (the marker's `present`) whose record is
//   deleted leaves the container: removed with `rm` (run as root) when the container runs and
//   can, else emptied (its content replaced by nothing, which works in any state) and removed once
//   it runs. Intent first: before the container is touched, the marker stops covering the file
//   (S6); `present` and `emptied` lose it only after.
// - S6 a marker never covers (S3) a file that may be missing or empty: a removal is persisted as
//   intent (the file out of `files`, still in `present`) before the rm or the emptying, so a
//   removal whose final marker write never lands (timeout, kill, leadership lost) leaves a marker
//   that does not cover the file, and the same secret written again is uploaded again.
import type { ContainerCache, CachedContainer } from "../../adapters/cluster/container-cache.ts";
import { buildTar, EngineError, InvalidRequestError, NotFoundError, type Cluster } from "../../adapters/cluster/index.ts";
import type { Store } from "../../adapters/store/store.ts";
import type { Clock } from "../../runtime/clock.ts";
import { withDeadline } from "../../runtime/deadline.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { ReconcileContext, Result } from "../../runtime/result.ts";
import { isPreviousContainer } from "../shared/previous.ts";
import { filesToRemove, planInstall, removalIntent } from "./files.ts";
import { decodeMarker, markerCovers, markerHasError, presentFiles, samePaths, type Marker, type MarkerEntry } from "./marker.ts";
import { appOf, listsSecrets, type SpecEntry } from "./specs.ts";
import type { SecretFileRecord, SyncVault } from "./vault.ts";

/** Container labels of the PodGroup naming contract (docs/cluster.md, "Container names and labels"). */
export const podGroupLabel = "io.capstan.podgroup";
export const containerIndexLabel = "io.capstan.container-index";

export const groupKey = (name: string) => `group/${name}`;
export const markerGcKey = (containerId: string) => `marker/${containerId}`;

/** States in which a container's filesystem exists and will be (or is) used: install into these. */
const installable = new Set(["created", "running", "exited", "paused", "restarting"]);

export interface SecretSyncReconcilerOptions {
  /** Fenced store: marker writes. */
  store: Store;
  cluster: Cluster;
  cache: ContainerCache;
  specs: Informer<SpecEntry>;
  markers: Informer<MarkerEntry>;
  vault: SyncVault;
  readSecrets(app: string, proc: string): Promise<readonly SecretFileRecord[]>;
  specKey(name: string): string;
  markerKey(containerId: string): string;
  /** Bound of readSecrets and of the wait for our own marker write to reach the informer. */
  callTimeoutMs: number;
  /** Containers of one group installed at once. */
  installConcurrency: number;
  /** How soon a marker whose container's node is not visible is looked at again. */
  unknownNodeRecheckMs: number;
  clock: Clock;
  now(): number;
}

export class SecretSyncReconciler {
  constructor(private readonly o: SecretSyncReconcilerOptions) {}

  readonly reconcile = async (key: string, ctx: ReconcileContext): Promise<Result | void> => {
    if (key.startsWith("group/")) return this.syncGroup(key.slice("group/".length), ctx);
    if (key.startsWith("marker/")) return this.collect(key.slice("marker/".length), ctx);
    ctx.log.warn({ key }, "unknown key kind; ignored");
  };

  private async syncGroup(name: string, ctx: ReconcileContext): Promise<void> {
    if (this.o.vault.sealed()) return; // S1
    const spec = this.o.specs.get(this.o.specKey(name));
    if (!spec || spec.deleting || !listsSecrets(spec)) return;
    const targets: { container: CachedContainer; listed: string[] }[] = [];
    for (const c of this.o.cache.byLabel(podGroupLabel, name)) {
      if (!installable.has(c.state)) continue;
      // A kept previous container (docs/podgroup-controller.md) never runs again: no files for it.
      if (isPreviousContainer(c)) continue;
      // An unreachable node cannot take an upload; its "node-ready" change enqueues the group again.
      if (this.o.cache.nodeState(c.node) !== "ready") continue;
      const index = Number(c.labels[containerIndexLabel] ?? "0");
      const listed = Number.isInteger(index) ? spec.secretFiles?.[index] : undefined;
      if (listed && listed.length > 0) targets.push({ container: c, listed });
    }
    if (targets.length === 0) return;

    const records = new Map<string, SecretFileRecord>();
    let read: readonly SecretFileRecord[];
    try {
      read = await withDeadline(this.o.readSecrets(appOf(name), name), this.o.callTimeoutMs, this.o.clock, `read secrets of ${name}`, ctx.signal);
    } catch (err) {
      if (this.o.vault.sealed()) return; // sealed meanwhile: the unseal enqueues the group again (S1)
      throw err;
    }
    for (const r of read) records.set(r.path, r);

    const failures: unknown[] = [];
    let next = 0;
    const worker = async () => {
      while (next < targets.length && !ctx.signal.aborted) {
        const t = targets[next++]!;
        try {
          await this.syncContainer(name, t.container, t.listed, records, ctx);
        } catch (err) {
          if (err instanceof NotFoundError) continue; // removed meanwhile: its marker is collected (S4)
          failures.push(err);
          ctx.log.warn({ err, container: t.container.id, node: t.container.node }, "secret files not installed; retried with back-off");
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.o.installConcurrency, targets.length) }, worker));
    ctx.signal.throwIfAborted();
    if (failures.length > 0) throw failures[0];
  }

  private async syncContainer(
    name: string,
    c: CachedContainer,
    listed: string[],
    records: ReadonlyMap<string, SecretFileRecord>,
    ctx: ReconcileContext,
  ): Promise<void> {
    let current = this.o.markers.get(this.o.markerKey(c.id))?.marker;
    // S5: files whose record was deleted go first, whatever the rest of the plan.
    const before = presentFiles(current);
    const gone = filesToRemove(before, records);
    const present = before.filter((p) => !gone.includes(p));
    // Emptied earlier (the container could not run rm then): removed once it runs. A file whose
    // record is back is no longer ours to remove: it is installed again, or was never listed.
    let emptied = filesToRemove(current?.emptied ?? [], records);
    const plan = planInstall(name, listed, records);
    if (gone.length > 0) {
      // S6: persist the intent before acting; this marker's `files` name none of `gone`.
      const intent = removalIntent(current, name, gone, plan);
      if (intent !== undefined) current = await this.writeMarker(c, { ...intent, present: before, ...(current?.emptied?.length ? { emptied: current.emptied } : {}) }, ctx);
      if ((await this.removeFiles(c, gone, ctx)) === "emptied") emptied = [...new Set([...emptied, ...gone])];
    } else if (emptied.length > 0 && c.state === "running") {
      // One try: an image without rm keeps the empty file (docs/secret-sync.md, "Deleted secrets").
      if (await this.runRm({ node: c.node, id: c.id }, emptied, ctx)) ctx.log.info({ container: c.id, node: c.node, files: emptied }, "emptied secret files removed");
      emptied = [];
    }
    const bookkeeping = { present, ...(emptied.length > 0 ? { emptied } : {}) };
    const sameBookkeeping = current?.present !== undefined && samePaths(before, present) && samePaths(current.emptied ?? [], emptied);

    if (plan.kind === "error") {
      if (markerHasError(current, name, plan.error) && sameBookkeeping) return;
      ctx.log.info({ container: c.id, error: plan.error }, "secret files cannot be installed");
      await this.writeMarker(c, { podGroup: name, files: [], error: plan.error, ...bookkeeping }, ctx);
      return;
    }
    if (markerCovers(current, name, plan.installed)) {
      // S3: nothing to upload; a removal above is recorded. (A marker from before `present`
      // counts its files as present: presentFiles.)
      if (gone.length > 0 || !samePaths(current?.emptied ?? [], emptied)) await this.writeMarker(c, { podGroup: name, files: plan.installed, ...bookkeeping }, ctx);
      return;
    }
    const tar = await buildTar(plan.files);
    try {
      await this.o.cluster.putArchive({ node: c.node, id: c.id }, "/", tar, { signal: ctx.signal });
    } catch (err) {
      // The engine refused the archive itself (e.g. a listed path is a directory in the image):
      // retrying cannot help until the spec or the secret changes, so say why in the marker.
      if (!refusedArchive(err)) throw err;
      const error = `secret files of ${name} cannot be installed: ${err.message}`;
      ctx.log.warn({ container: c.id, node: c.node, error }, "the engine refused the secret files");
      if (!(markerHasError(current, name, error) && sameBookkeeping)) await this.writeMarker(c, { podGroup: name, files: [], error, ...bookkeeping }, ctx);
      return;
    }
    ctx.log.info({ container: c.id, node: c.node, files: plan.installed.map((f) => f.path) }, "secret files installed");
    const installed = plan.files.map((f) => f.path);
    const nowPresent = [...new Set([...present, ...installed])];
    const stillEmptied = emptied.filter((p) => !installed.includes(p));
    await this.writeMarker(c, { podGroup: name, files: plan.installed, present: nowPresent, ...(stillEmptied.length > 0 ? { emptied: stillEmptied } : {}) }, ctx); // S2: after the upload
  }

  /**
   * S5: takes files out of a container. A running container runs `rm -f` (no shell); when it
   * cannot (not running, no `rm` in the image, a filesystem that refuses), each file is
   * emptied instead through the archive upload, which works in every state and needs nothing in
   * the image: the secret's content is gone either way, and an emptied file stays as an empty,
   * root-only (400) file until the container runs (the marker's `emptied`). Only a failure to
   * reach the engine throws (retried with back-off).
   */
  private async removeFiles(c: CachedContainer, paths: string[], ctx: ReconcileContext): Promise<"removed" | "emptied"> {
    const ref = { node: c.node, id: c.id };
    if (c.state === "running" && (await this.runRm(ref, paths, ctx))) {
      ctx.log.info({ container: c.id, node: c.node, files: paths }, "secret files of deleted secrets removed");
      return "removed";
    }
    const tar = await buildTar(paths.map((path) => ({ path, content: "", mode: 0o400, uid: 0, gid: 0 })));
    try {
      await this.o.cluster.putArchive(ref, "/", tar, { signal: ctx.signal });
    } catch (err) {
      // A path that became a directory holds no secret of ours any more.
      if (!refusedArchive(err)) throw err;
    }
    ctx.log.info({ container: c.id, node: c.node, files: paths }, "secret files of deleted secrets emptied (the container could not remove them)");
    return "emptied";
  }

  /** `rm -f -- paths` in the running container: true when it exited 0. */
  private async runRm(ref: { node: string; id: string }, paths: string[], ctx: ReconcileContext): Promise<boolean> {
    try {
      // As root: the files are root's (0400), and an image's non-root user may not delete them.
      const session = await this.o.cluster.exec(ref, { cmd: ["rm", "-f", "--", ...paths], user: "0", signal: ctx.signal });
      try {
        const ran = (async () => {
          for await (const _frames of session.output) {
            // Output is not needed (and never logged): only the exit code.
          }
          return session.exitCode;
        })();
        return (await withDeadline(ran, this.o.callTimeoutMs, this.o.clock, "rm of deleted secret files", ctx.signal)) === 0;
      } finally {
        await session.close().catch(() => undefined);
      }
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      ctx.log.debug({ err, container: ref.id }, "rm of deleted secret files did not run; emptying them");
      return false;
    }
  }

  private async writeMarker(c: CachedContainer, m: Omit<Marker, "at" | "node">, ctx: ReconcileContext): Promise<Marker> {
    const marker: Marker = { ...m, at: new Date(this.o.now()).toISOString(), node: c.node };
    const result = await this.o.store.put(this.o.markerKey(c.id), JSON.stringify(marker));
    // Read-your-own-writes: the next reconcile of the group compares against this marker, not an
    // older one (which would upload the same files again). A slow informer only costs that upload.
    await this.o.markers.waitForRevision(result.revision, ctx.signal, this.o.callTimeoutMs).catch(() => {});
    return marker;
  }

  /** S4: the container is gone from the cache (not merely unknown): its marker goes too. */
  private async collect(containerId: string, ctx: ReconcileContext): Promise<Result | void> {
    const key = this.o.markerKey(containerId);
    const seen = await this.o.store.get(key);
    if (!seen) return;
    const node = decodeMarker(seen).marker?.node;
    if (node !== undefined ? this.o.cache.get(node, containerId) !== undefined : this.o.cache.list().some((c) => c.id === containerId)) return;
    // A node we cannot see (down since start-up, so never listed, or unreachable now) may still
    // hold the container: look again later rather than take "unknown" for "gone". (We always write
    // `node`; a marker without it predates that field and is judged by the cache alone.)
    if (node !== undefined && this.o.cache.nodeState(node) !== "ready") return { requeueAfterMs: this.o.unknownNodeRecheckMs };
    // Compare-and-delete: a marker rewritten since we read it is looked at again by its own event.
    await this.o.store.delete(key, { expect: [{ key, target: "modRevision", equals: seen.modRevision }] });
    ctx.log.info({ container: containerId }, "marker of a removed container deleted");
  }
}

/**
 * An archive the engine will never accept as it is: a 400, or the 500 dockerd answers when an
 * entry would replace a directory with a file ("cannot overwrite directory ... with
 * non-directory", noOverwriteDirNonDir). Anything else (engine down, timeouts) is retried.
 */
function refusedArchive(err: unknown): err is Error {
  return err instanceof InvalidRequestError || (err instanceof EngineError && /cannot overwrite (non-)?directory/i.test(err.message));
}
