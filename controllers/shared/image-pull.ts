// Pulling a missing image before a pod is created: the same for PodGroup instances and dependency
// pods. One ImagePuller per orchestrator process serves both controllers, so however many pods
// wait for one image on one node, the node pulls it once.
//
// A pull takes minutes; a pass must not. So a pass only asks (ensureImages): every image there ->
// "ready", create the pod now; a pull under way -> "pulling" (the pass reports it as the pod's
// lastError, state pending, and looks again in pullRecheckMs); the pull failed -> "failed", once per
// pod that waited for it (the pass counts it as a failed deploy: back-off, then a fresh pull). The
// pull itself runs in the background, bounded by the cluster (a write slot of the node, the pull
// timeout) and by the puller's lifetime: it is a Runnable, leader-only like the controllers, and
// stopping it aborts every pull in flight.
//
// Whether an image is there is the engine's answer (hasImage: an image inspect, a cheap read), asked
// before every deploy: nothing is remembered about images, so an image removed behind our back is
// pulled again, and an image already on the node (the common case) costs one read and no pull.
//
// Credentials: `credentials(image)` answers the registry credentials for an image (undefined: pull
// anonymously). What reaches the engine is a registry bearer token at most (RegistryAuth), never a
// password: see registry-credentials.ts for the platform registry's pull-only tokens.
import { ClusterError, type Cluster, type PullProgress, type RegistryAuth } from "../../adapters/cluster/index.ts";
import { untilAborted } from "../../runtime/aborted.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";

/** What a pull is given: the engine's credentials, and what the log may say of them (never a secret). */
export interface PullCredentials {
  auth: RegistryAuth;
  log: Record<string, string | number>;
}

/** Credentials for pulling `image`; undefined = anonymous. A rejection fails that pull. */
export type RegistryCredentials = (image: string, signal: AbortSignal) => Promise<PullCredentials | undefined>;

export type ImagesState =
  | { kind: "ready" }
  /** message: "pulling <image> on <node> (35%)" */
  | { kind: "pulling"; message: string }
  /** message: "image pull failed: <image> on <node>: <the engine's or registry's answer>" */
  | { kind: "failed"; message: string };

export interface ImagePullerOptions {
  cluster: Pick<Cluster, "hasImage" | "pullImage">;
  credentials?: RegistryCredentials;
  log?: Logger;
  /** Wall clock, ms (default Date.now). */
  now?: () => number;
  /** How long a failed pull's outcome waits for the pods that waited for it (default 10 min). */
  failureTtlMs?: number;
}

/** How often a pass looks at a pull in progress (its percentage in the status moves with it). */
export const pullRecheckMs = 2_000;

interface Pulling {
  state: "pulling";
  image: string;
  node: string;
  /** Who waits for it (pods, by a key of the controller's choosing). */
  waiters: Set<string>;
  progress: PullProgress | undefined;
}

interface Failed {
  state: "failed";
  message: string;
  /** The waiters not yet told; the entry goes once they all were (or it expired). */
  unseen: Set<string>;
  at: number;
}

export class ImagePuller implements Runnable {
  readonly name = "image-puller";
  private readonly pulls = new Map<string, Pulling | Failed>();
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly failureTtlMs: number;
  /** Aborted when the runnable stops: every pull in flight ends with it. */
  private term = new AbortController();

  constructor(private readonly o: ImagePullerOptions) {
    this.log = (o.log ?? silentLogger).child({ component: "image-puller" });
    this.now = o.now ?? Date.now;
    this.failureTtlMs = o.failureTtlMs ?? 600_000;
  }

  async start(signal: AbortSignal): Promise<void> {
    await untilAborted(signal);
    const stopped = this.term;
    this.term = new AbortController(); // a later term (leadership regained) starts clean
    this.pulls.clear();
    stopped.abort(signal.reason);
  }

  /**
   * Whether every one of `images` is on `node`, starting the pulls of those that are not.
   * `waiter` names the pod asking (e.g. "podgroup/shop.web/0"): a failed pull is reported once to
   * each pod that waited for it, and a pod asking again after that starts a fresh pull. Engine
   * errors of the presence check (node unreachable) are thrown.
   */
  async ensureImages(node: string, images: readonly string[], waiter: string, signal: AbortSignal): Promise<ImagesState> {
    let pulling: ImagesState | undefined;
    for (const image of [...new Set(images)]) {
      const s = await this.ensure(node, image, waiter, signal);
      if (s.kind === "failed") return s;
      if (s.kind === "pulling") pulling ??= s;
    }
    return pulling ?? { kind: "ready" };
  }

  /** Pulls in flight now, for tests and logs. */
  get inFlight(): number {
    return [...this.pulls.values()].filter((p) => p.state === "pulling").length;
  }

  private async ensure(node: string, image: string, waiter: string, signal: AbortSignal): Promise<ImagesState> {
    this.expire();
    const key = `${node}\n${image}`;
    const known = this.pulls.get(key);
    if (known?.state === "pulling") return this.join(known, waiter);
    if (known?.state === "failed" && known.unseen.delete(waiter)) {
      if (known.unseen.size === 0) this.pulls.delete(key);
      return { kind: "failed", message: known.message };
    }
    if (await this.o.cluster.hasImage(node, image, { signal })) return { kind: "ready" };
    // Another pass may have started it while we asked.
    const now = this.pulls.get(key);
    if (now?.state === "pulling") return this.join(now, waiter);
    const entry: Pulling = { state: "pulling", image, node, waiters: new Set([waiter]), progress: undefined };
    this.pulls.set(key, entry);
    void this.pull(key, entry);
    return { kind: "pulling", message: pullingMessage(entry) };
  }

  private join(p: Pulling, waiter: string): ImagesState {
    p.waiters.add(waiter);
    return { kind: "pulling", message: pullingMessage(p) };
  }

  private async pull(key: string, entry: Pulling): Promise<void> {
    const { node, image } = entry;
    const signal = this.term.signal;
    const started = this.now();
    try {
      const creds = await this.o.credentials?.(image, signal);
      this.log.info({ node, image, ...(creds && { registry: creds.auth.serveraddress, ...creds.log }) }, "pulling image");
      await this.o.cluster.pullImage(node, image, {
        signal,
        ...(creds && { auth: creds.auth }),
        onProgress: (p) => {
          entry.progress = p;
        },
      });
      if (this.pulls.get(key) === entry) this.pulls.delete(key);
      this.log.info({ node, image, ms: this.now() - started }, "image pulled");
    } catch (e) {
      if (this.pulls.get(key) !== entry) return; // the puller stopped (or started over) meanwhile
      if (signal.aborted) {
        this.pulls.delete(key);
        return;
      }
      const message = `image pull failed: ${pullFailure(e, image, node)}`;
      this.pulls.set(key, { state: "failed", message, unseen: entry.waiters, at: this.now() });
      this.log.warn({ node, image, err: e, waiters: [...entry.waiters] }, "image pull failed");
    }
  }

  private expire(): void {
    const limit = this.now() - this.failureTtlMs;
    for (const [k, p] of this.pulls) if (p.state === "failed" && p.at < limit) this.pulls.delete(k);
  }
}

/** "pulling 127.0.0.1:5000/shop/web:v1 on n1 (35%)"; no percentage before the engine reported sizes. */
export function pullingMessage(p: { image: string; node: string; progress: PullProgress | undefined }): string {
  const pr = p.progress;
  const pct = pr && pr.totalBytes > 0 ? ` (${Math.floor((100 * pr.currentBytes) / pr.totalBytes)}%)` : "";
  return `pulling ${p.image} on ${p.node}${pct}`;
}

/** "<image> on <node>: <answer>", from the cluster's "pullImage <image> on <node>: <answer>". */
function pullFailure(e: unknown, image: string, node: string): string {
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof ClusterError) {
    for (const op of ["pullImage", "hasImage"]) {
      const prefix = `${op} ${image} on ${node}: `;
      if (message.startsWith(prefix)) return `${image} on ${node}: ${message.slice(prefix.length)}`;
    }
  }
  return `${image} on ${node}: ${message}`;
}

/**
 * The registry of an image reference, as the engine reads it: the first path component when it
 * looks like a host (has "." or ":", or is "localhost"), else Docker Hub ("docker.io").
 */
export function imageRegistry(image: string): string {
  const slash = image.indexOf("/");
  if (slash < 0) return "docker.io";
  const first = image.slice(0, slash);
  return first.includes(".") || first.includes(":") || first === "localhost" ? first.toLowerCase() : "docker.io";
}
