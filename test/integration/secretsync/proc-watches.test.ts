// ProcSecretWatches over the shared etcd: secret writes reach Secret-sync only for procs whose
// spec lists secret files; a spec that stops listing closes its watch; a broken watch is reopened
// and its group enqueued again (W1). Keys live under a unique prefix.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { WatchBrokenError } from "../../../adapters/store/errors.ts";
import type { Store, WatchHandlers } from "../../../adapters/store/store.ts";
import { ProcSecretWatches } from "../../../controllers/secretsync/proc-watches.ts";
import { decodeSpec } from "../../../controllers/secretsync/specs.ts";
import { realClock } from "../../../runtime/clock.ts";
import { Informer } from "../../../runtime/informer.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const root = `/test/${uniqueName("procwatch")}/`;
const specPrefix = `${root}podgroups/`;
const secretsPrefix = `${root}secrets/`;

/** The real store, with a way to break every open watch as etcd would (onError, then nothing). */
function breakable(store: Store): { store: Store; breakAll(): void } {
  const open: { handlers: WatchHandlers; close(): Promise<void> }[] = [];
  const wrapped = Object.create(store) as Store;
  wrapped.watch = (prefix, fromRevision, handlers) => {
    const w = store.watch(prefix, fromRevision, handlers);
    open.push({ handlers, close: () => w.close() });
    return w;
  };
  return {
    store: wrapped,
    breakAll: () => {
      for (const w of open.splice(0)) void w.close().then(() => w.handlers.onError(new WatchBrokenError("broken by the test")));
    },
  };
}

/** Polls a synchronous condition for up to 5 s. */
const until = (check: () => boolean) => pollUntil(check.toString(), async () => check(), 5_000, 20);

const spec = (name: string, files: string[]) => JSON.stringify({ name, namespace: name.split(".")[0], pod: { containers: [{ secretFiles: files }] } });

describe("ProcSecretWatches", () => {
  let store: EtcdStore;

  beforeAll(() => {
    store = new EtcdStore({ endpoints: loadServices().etcdEndpoints, watchPrevKv: false });
  });

  afterAll(async () => {
    await store.deletePrefix(root);
    await store.close();
  });

  it("watches only listed procs, follows spec changes, and reopens a broken watch", async () => {
    const { store: s, breakAll } = breakable(store);
    const specs = new Informer({ name: "procwatch-specs", source: store, prefix: specPrefix, decode: decodeSpec });
    const watches = new ProcSecretWatches({ store: s, specs, secretsPrefix, retryMs: 50, clock: realClock, log: silentLogger });
    const keys: string[] = [];
    specs.start();
    await specs.waitForSync();
    watches.start((key) => keys.push(key));
    try {
      const listed = "shop.web.listed";
      const unlisted = "shop.web.unlisted";
      await store.put(`${specPrefix}${listed}`, spec(listed, ["app.env"]));
      await store.put(`${specPrefix}${unlisted}`, spec(unlisted, []));
      // W1: the group is enqueued once its watch's start revision is read.
      await until(() => keys.includes(`group/${listed}`));
      expect(watches.size).toBe(1);

      keys.length = 0;
      await store.put(`${secretsPrefix}shop/${unlisted}/app.env`, "v1.x");
      await store.put(`${secretsPrefix}shop/${listed}/app.env`, "v1.x");
      await until(() => keys.includes(`group/${listed}`));
      await new Promise((r) => setTimeout(r, 200));
      expect(keys.every((k) => k === `group/${listed}`)).toBe(true);

      // A broken watch is opened again and its group enqueued (writes meanwhile are read then).
      keys.length = 0;
      breakAll();
      await until(() => keys.includes(`group/${listed}`));
      keys.length = 0;
      await store.put(`${secretsPrefix}shop/${listed}/app.env`, "v1.y");
      await until(() => keys.includes(`group/${listed}`));

      // A spec that no longer lists secrets closes its watch: its writes enqueue nothing.
      await store.put(`${specPrefix}${listed}`, spec(listed, []));
      await until(() => watches.size === 0);
      keys.length = 0;
      await store.put(`${secretsPrefix}shop/${listed}/app.env`, "v1.z");
      await new Promise((r) => setTimeout(r, 300));
      expect(keys).toEqual([]);
    } finally {
      watches.stop();
      await specs.stop();
    }
  });
});
