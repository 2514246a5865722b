// Conversions between etcd3's wire shapes (int64 as decimal strings, keys and values as Buffers)
// and the store's KeyValue / WatchEvent.
import type { IEvent, IKeyValue } from "etcd3";
import type { KeyValue, WatchEvent } from "./store.ts";

export function toKeyValue(kv: IKeyValue): KeyValue {
  const out: KeyValue = {
    key: kv.key.toString("utf8"),
    value: kv.value.toString("utf8"),
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    version: Number(kv.version),
  };
  // etcd reports "no lease" as lease 0; the interface leaves the field out instead.
  if (kv.lease && kv.lease !== "0") out.lease = String(kv.lease);
  return out;
}

export function toWatchEvent(event: IEvent): WatchEvent {
  const out: WatchEvent = {
    type: event.type === "Delete" ? "delete" : "put",
    kv: toKeyValue(event.kv),
  };
  if (event.prev_kv) out.prevKv = toKeyValue(event.prev_kv);
  return out;
}
