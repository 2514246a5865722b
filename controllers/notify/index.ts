// The notifier's assembly (docs/notify.md): the informers of the channel kinds and the apps'
// routes, and the leader-only Notifier that follows the events. Installed by cli/orchestrator.ts,
// which passes the events informer it already runs for GET /api/events.
import type { Registry } from "prom-client";
import type { Store } from "../../adapters/store/store.ts";
import type { EventRecord } from "../../api/resources/event.ts";
import { decodeChannelRecord, decodeRoutesRecord, notifyKeys, type NotifyChannelRecord, type NotifyRoutesRecord } from "../../api/resources/notify.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import type { EventSink } from "../shared/events.ts";
import { Notifier, type NotifierOptions } from "./notifier.ts";

export { Notifier, type NotifierOptions } from "./notifier.ts";

export interface NotifyControllerOptions extends Partial<Omit<NotifierOptions, "events" | "channels" | "routes" | "store" | "recorder">> {
  /** Plain store: the informers read through it. */
  store: Store;
  /** The fenced store: the leader's marker writes. */
  fenced: Store;
  events: Informer<EventRecord>;
  recorder: EventSink;
  log?: Logger;
  registry?: Registry;
}

export function createNotifyController(opts: NotifyControllerOptions): { informers: Informer<unknown>[]; notifier: Notifier } {
  const log = opts.log ?? silentLogger;
  const decode =
    <T>(what: string, fn: (value: string) => T | undefined) =>
    (kv: KeyValueLike): T => {
      const r = fn(kv.value);
      if (r === undefined) throw new TypeError(`${kv.key} is not a notify ${what} record`);
      return r;
    };
  const channels = new Informer<NotifyChannelRecord>({ name: "notify-channels", source: opts.store, prefix: notifyKeys.channels, decode: decode("channel", decodeChannelRecord), log, ...(opts.registry && { registry: opts.registry }) });
  const routes = new Informer<NotifyRoutesRecord>({ name: "notify-routes", source: opts.store, prefix: notifyKeys.routes, decode: decode("routes", decodeRoutesRecord), log, ...(opts.registry && { registry: opts.registry }) });
  const notifier = new Notifier({ ...opts, store: opts.fenced, events: opts.events, channels, routes, recorder: opts.recorder, log });
  return { informers: [channels as Informer<unknown>, routes as Informer<unknown>], notifier };
}
