// Pieces of a controller's status bookkeeping that do not depend on what the status says. Pure,
// apart from statusSource's event handlers.
import type { Store } from "../../adapters/store/store.ts";
import type { Informer } from "../../runtime/informer.ts";
import type { Source } from "../../runtime/source.ts";
import { StatusConflictError } from "./errors.ts";
import type { StatusWritesInFlight } from "./status-writes-in-flight.ts";

/** Whether two statuses say the same thing (updatedAt aside): no write when nothing changed. */
export function sameStatus<S extends { updatedAt: string }>(a: S | undefined, b: S): boolean {
  if (!a) return false;
  return JSON.stringify({ ...a, updatedAt: "" }) === JSON.stringify({ ...b, updatedAt: "" });
}

/**
 * Status changes made by anyone but this controller enqueue the key; its own writes (their
 * revision is `ownRevision(name)`) do not echo back. `initialList`: whether the statuses listed at
 * start enqueue their key too (needed when a status may outlive its spec, e.g. an interrupted
 * removal; not needed when the spec informer enqueues every key anyway). `inFlight`: the
 * controller's writes in flight, whose echo may come before their revision is known
 * (status-writes-in-flight.ts): an event of such a key is judged when the write settles.
 */
export function statusSource<E extends { name: string; modRevision: number }>(
  statuses: Informer<E>,
  ownRevision: (name: string) => number | undefined,
  opts: { name: string; initialList: boolean; inFlight?: StatusWritesInFlight },
): Source {
  let unregister: (() => void) | undefined;
  const foreign = (e: E) => !(opts.inFlight?.hold(e.name, e.modRevision) ?? false) && e.modRevision !== ownRevision(e.name);
  return {
    name: opts.name,
    start(enqueue) {
      unregister?.();
      opts.inFlight?.onForeign(enqueue);
      unregister = statuses.addEventHandler({
        onAdd: (e, _key, meta) => {
          if (meta.isInInitialList ? opts.initialList : foreign(e)) enqueue(e.name);
        },
        onUpdate: (_old, e) => {
          if (foreign(e)) enqueue(e.name);
        },
        onDelete: (e) => enqueue(e.name),
      });
    },
    stop() {
      opts.inFlight?.onForeign(undefined);
      unregister?.();
      unregister = undefined;
    },
    waitForSync: (signal, timeoutMs) => statuses.waitForSync(signal, timeoutMs),
  };
}

export interface StatusRecord<S> {
  /** The last segment of the key. */
  name: string;
  status: S | undefined;
  modRevision: number;
}

/** A status is taken as-is when it has the shape the controllers write ({state, pods[]}); anything else reads as absent. */
export function decodeStatusRecord<S extends { state: string; pods: unknown[] }>(kv: { key: string; value: string; modRevision: number }): StatusRecord<S> {
  const name = kv.key.slice(kv.key.lastIndexOf("/") + 1);
  let status: S | undefined;
  try {
    const v = JSON.parse(kv.value) as Partial<S> | null;
    if (v && typeof v === "object" && typeof v.state === "string" && Array.isArray(v.pods)) status = v as S;
  } catch {
    status = undefined;
  }
  return { name, status, modRevision: kv.modRevision };
}

/**
 * The status at `key` as of at least our own last write (`ownRevision`): from the informer once it
 * has caught up (5 s at most), else from the store. A pass never decides from a status older than
 * one it wrote itself.
 */
export async function readOwnStatus<E>(o: {
  statuses: Informer<E>;
  store: Store;
  key: string;
  ownRevision: number;
  decode: (kv: { key: string; value: string; modRevision: number }) => E;
  signal: AbortSignal;
}): Promise<E | undefined> {
  if (o.ownRevision > o.statuses.cacheRevision()) {
    try {
      await o.statuses.waitForRevision(o.ownRevision, o.signal, 5_000);
    } catch (e) {
      if (o.signal.aborted) throw e;
      const kv = await o.store.get(o.key);
      return kv ? o.decode(kv) : undefined;
    }
  }
  return o.statuses.get(o.key);
}

/**
 * Write `next` at `key` with compare-and-swap on `prev`'s modRevision (0: create), only when it
 * says something `prev` does not (sameStatus). A StatusConflictError when someone wrote between.
 * Returns the record now stored and whether this call wrote it. The write is one of `own.writes`
 * while in flight (status-writes-in-flight.ts); `own.recorded` is told the revision written before
 * the events held meanwhile are judged, so later ones compare with it.
 */
export async function writeStatusIfChanged<S extends { updatedAt: string }>(
  store: Store,
  key: string,
  prev: StatusRecord<S> | undefined,
  next: S,
  own: { writes: StatusWritesInFlight; recorded(revision: number): void },
): Promise<{ record: StatusRecord<S>; written: boolean }> {
  if (prev && sameStatus(prev.status, next)) return { record: prev, written: false };
  const name = key.slice(key.lastIndexOf("/") + 1);
  const settled = own.writes.begin(name);
  let revision: number | undefined;
  try {
    const res = await store.put(key, JSON.stringify(next), { expect: [{ key, target: "modRevision", equals: prev?.modRevision ?? 0 }] });
    if (!res.succeeded) throw new StatusConflictError(`status ${key} changed since it was read; retrying`);
    revision = res.revision;
    own.recorded(revision);
    return { record: { name, status: next, modRevision: revision }, written: true };
  } finally {
    settled(revision);
  }
}
