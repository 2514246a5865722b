// A Source feeds keys to a controller's work queue. Events carry no payload into the reconcile:
// a source only says "look at this key again" (level-triggered; docs/runtime.md, "Sources"). Informers
// become sources through informerSource(); anything else that learns about changes (a Docker
// events stream, a timer) implements Source directly.
import type { Informer } from "./informer.ts";

export interface EnqueueOptions {
  priority?: number;
  afterMs?: number;
}

export type Enqueue = (key: string, options?: EnqueueOptions) => void;

export interface Source {
  readonly name: string;
  /** Begin delivering keys. Called on every controller start (e.g. once per leadership term). */
  start(enqueue: Enqueue): void | Promise<void>;
  /** Stop delivering keys. */
  stop(): void | Promise<void>;
  /**
   * Resolves when the source has delivered its initial state; the controller's workers start only
   * after every source that has this method resolved it (or fails the start on timeout).
   */
  waitForSync?(signal: AbortSignal, timeoutMs: number): Promise<void>;
}

/** Priority of keys from an informer's initial list, below normal traffic (controller-runtime's LowPriority). */
export const lowPriority = -100;

/** Maps a cached object to the keys of the controller to run for it (e.g. its owner's key). */
export type MapFunc<T> = (obj: T, key: string) => string[];

/**
 * Enqueue keys for an informer's events. Adds from the initial list (and the replay of an already
 * synced cache when a controller starts later, e.g. on winning an election) go in at lowPriority,
 * so fresh changes overtake the bulk; every other event at priority 0. An update enqueues the keys
 * of both the old and the new object, so a change of owner reaches both owners. Without `map`,
 * the store key itself is the reconcile key.
 */
export function informerSource<T>(informer: Informer<T>, map?: MapFunc<T>): Source {
  const keysOf: MapFunc<T> = map ?? ((_obj, key) => [key]);
  let unregister: (() => void) | undefined;
  return {
    name: `informer:${informer.name}`,
    start(enqueue) {
      unregister?.();
      unregister = informer.addEventHandler({
        onAdd: (obj, key, { isInInitialList }) => {
          for (const k of keysOf(obj, key)) enqueue(k, { priority: isInInitialList ? lowPriority : 0 });
        },
        onUpdate: (oldObj, newObj, key) => {
          for (const k of new Set([...keysOf(oldObj, key), ...keysOf(newObj, key)])) enqueue(k, { priority: 0 });
        },
        onDelete: (obj, key) => {
          for (const k of keysOf(obj, key)) enqueue(k, { priority: 0 });
        },
      });
    },
    stop() {
      unregister?.();
      unregister = undefined;
    },
    waitForSync: (signal, timeoutMs) => informer.waitForSync(signal, timeoutMs),
  };
}
