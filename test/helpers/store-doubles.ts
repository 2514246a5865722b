// Store doubles for tests of caches that answer reads (PodGroupReader, SecretCache): a source whose
// watch delivers late, as a loaded or partitioned replica's would, and a store that counts reads,
// to tell an answer from the cache from one read from the store.
import type { Store } from "../../adapters/store/store.ts";
import type { ListWatchSource, WatchHandlersLike } from "../../runtime/listwatch.ts";

/** The store's list and watch, with every watch delivery (events, progress) `delayMs` late, in order. */
export function lateWatch(store: Store, delayMs: number): ListWatchSource {
  return {
    list: (prefix, options) => store.list(prefix, options),
    revision: () => store.revision(),
    watch(prefix, fromRevision, handlers: WatchHandlersLike) {
      const later = (f: () => void) => setTimeout(f, delayMs);
      return store.watch(prefix, fromRevision, {
        onEvents: (events) => later(() => handlers.onEvents(events)),
        onProgress: (revision) => later(() => handlers.onProgress?.(revision)),
        onError: (error) => later(() => handlers.onError(error)),
      });
    },
  };
}

/** Counts the store reads a GET makes (get and list), to tell a cache answer from a store answer. */
export class CountingStore {
  reads = 0;
  readonly store: Store;
  constructor(inner: Store) {
    this.store = new Proxy(inner, {
      get: (target, prop, receiver) => {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== "function") return value;
        if (prop === "get" || prop === "list") {
          return (...args: unknown[]) => {
            this.reads++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
  }
}
