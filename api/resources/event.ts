// Events: what the controllers did and saw, as `kubectl get events` shows it (docs/events.md). The
// controllers record them through the EventRecorder (controllers/shared/events.ts), which
// aggregates repeats into one record (count, lastTime); the event pruner bounds them in age and
// number; GET /api/events reads them (api/orchestrator/events.ts).
//
// Stored form: events/<id> (eventsKeyPrefix under the orchestrator's root) = EventRecord as JSON.
// The id begins with the first time in milliseconds, zero-padded, so key order is creation order.
import { orchestratorPrefix } from "./keys.ts";

export const eventTypes = ["Normal", "Warning"] as const;
export type EventType = (typeof eventTypes)[number];

export const eventKinds = ["podgroup", "dependency", "node"] as const;
export type EventKind = (typeof eventKinds)[number];

/**
 * The reasons, a fixed set of CamelCase words (docs/events.md says when each is recorded). The
 * type each one is recorded with is in `eventTypeOf`.
 */
export const eventReasons = [
  // a rollout (create, or a new pod version) of a PodGroup or a dependency
  "DeployStarted",
  "DeploySucceeded",
  "DeployFailed",
  // an instance (or dependency pod) that stops
  "InstanceExited",
  "InstanceCrashed",
  "InstanceRestarted",
  "CrashLooping",
  "StartFailed",
  // what holds a pod back
  "SecretFilesMissing",
  "ImagePullFailed",
  // drift
  "Drifted",
  // dependency pods, deployed and reclaimed on demand
  "DependencyPodReclaimed",
  // nodes
  "NodeReady",
  "NodeDown",
  "NodeTimedOut",
  "NodeRemoved",
  // an event the notifier could not deliver to a notify channel (docs/notify.md)
  "NotifyFailed",
] as const;
export type EventReason = (typeof eventReasons)[number];

const warnings: ReadonlySet<EventReason> = new Set<EventReason>([
  "DeployFailed",
  "InstanceCrashed",
  "CrashLooping",
  "StartFailed",
  "SecretFilesMissing",
  "ImagePullFailed",
  "NodeDown",
  "NodeTimedOut",
  "NotifyFailed",
]);

/** Warning for what needs a look, Normal for the rest. */
export function eventTypeOf(reason: EventReason): EventType {
  return warnings.has(reason) ? "Warning" : "Normal";
}

/** What a controller hands the recorder: the event without its bookkeeping. */
export interface EventInput {
  type: EventType;
  reason: EventReason;
  kind: EventKind;
  /** The object's name (PodGroup, dependency or node). */
  name: string;
  /** The app (namespace) the object belongs to; absent for nodes, whose events everyone may read. */
  app?: string;
  /** The PodGroup instance (InstanceNo), when the event is about one. */
  instance?: number;
  /** The node the event happened on, when known. */
  node?: string;
  message: string;
}

/** What the store holds at events/<id> and GET /api/events answers. */
export interface EventRecord extends EventInput {
  /** Time-sortable: the first time in ms (13 digits), a sequence number and a random part. */
  id: string;
  /** How often it happened (repeats within 10 minutes are counted here, not written again). */
  count: number;
  /** RFC 3339: the first occurrence. */
  firstTime: string;
  /** RFC 3339: the last occurrence. */
  lastTime: string;
}

/** The events' key prefix under a root (default the orchestrator's). */
export function eventsKeyPrefix(root: string = orchestratorPrefix): string {
  return `${root.endsWith("/") ? root : `${root}/`}events/`;
}

/** A stored value read back; undefined when it is not an event record (left out by readers). */
export function decodeEventRecord(value: string): EventRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!v || typeof v !== "object") return undefined;
  const r = v as Partial<EventRecord>;
  if (
    typeof r.id !== "string" ||
    typeof r.reason !== "string" ||
    typeof r.kind !== "string" ||
    typeof r.name !== "string" ||
    typeof r.message !== "string" ||
    typeof r.count !== "number" ||
    typeof r.firstTime !== "string" ||
    typeof r.lastTime !== "string" ||
    (r.type !== "Normal" && r.type !== "Warning")
  ) {
    return undefined;
  }
  return r as EventRecord;
}

/** Newest last: by lastTime, then id (creation order). */
export function compareEvents(a: EventRecord, b: EventRecord): number {
  if (a.lastTime !== b.lastTime) return a.lastTime < b.lastTime ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
