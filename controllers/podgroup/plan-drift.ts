// Drift moves of one group, decided (R6; docs/nodes-and-drift.md and docs/podgroup-controller.md,
// "Nodes that cannot be reached"): which moves start now (the pass records them in status.internal
// BEFORE anything is removed), which recorded moves are done, cancelled or still to carry out, and
// which of those are due (R9: a failed move waits out its back-off). Pure, over drift.ts's rules.
import { isCurrentInstance, type PodStatus } from "../../api/resources/podgroup.ts";
import type { DriftTask } from "../../api/resources/task.ts";
import { newMoves, tasksForGroup } from "./drift.ts";
import type { GroupView } from "./observe.ts";
import type { DriftMove, InstanceRecord, Internal, StoredPodGroup } from "./stored.ts";

/**
 * Moves that start now, as the records to write (R6: the pass persists them before it removes
 * anything). An instance the stored rollout step is replacing is not moved.
 */
export function planDriftStarts(
  spec: StoredPodGroup,
  view: GroupView,
  internal: Internal,
  drifts: readonly DriftTask[],
  unseen: ReadonlyMap<number, PodStatus>,
): Map<number, DriftMove> {
  const rolloutInstance = internal.rollout?.instance;
  const starts = newMoves(spec, view, internal, tasksForGroup(spec, drifts), (instance) => rolloutInstance === instance, unseen);
  const moves = new Map<number, DriftMove>();
  for (const [instance, start] of starts) {
    moves.set(instance, { task: start.task.id, from: start.task.from, drift: start.drift, ...(start.task.to !== undefined && { to: start.task.to }) });
  }
  return moves;
}

export interface MovesPlan {
  /** Moves still to carry out, by instance. */
  moving: Map<number, DriftMove>;
  /** Records that change: a move done, cancelled or scaled away is cleared. */
  records: Map<number, InstanceRecord>;
  /** Moves whose task was deleted before the move was made (for the log). */
  cancelled: { instance: number; move: DriftMove }[];
}

/**
 * Every move recorded in `internal` (those just started included), settled against what is
 * observed: scaled away (cleared), cancelled (its task deleted while the pod is still on `from`, or
 * gone), done (the new pod exists), already off `from` (e.g. replaced by a spec update's step), or
 * still to carry out.
 */
export function planMoves(spec: StoredPodGroup, view: GroupView, internal: Internal, drifts: readonly DriftTask[]): MovesPlan {
  const plan: MovesPlan = { moving: new Map(), records: new Map(), cancelled: [] };
  for (const [key, record] of Object.entries(internal.instances)) {
    const instance = Number(key);
    const move = record.move;
    if (!move) continue;
    const kept = view.instances.get(instance)?.kept;
    const { move: _done, ...rest } = record;
    if (!isCurrentInstance(instance, spec.numInstances)) {
      plan.records.set(instance, rest); // scaled away: nothing to move
    } else if (!drifts.some((task) => task.id === move.task) && (!kept || kept.node === move.from)) {
      // The task was deleted before the move was made: cancelled. The instance stays where it
      // is; one whose pod on `from` is already gone is redeployed with the move's drift count, so
      // it still outranks any copy left on an unreachable `from`. The drift's own failures ("no
      // node fits") go with it.
      const { lastError: _error, nextDeployAt: _at, ...clean } = rest;
      plan.records.set(instance, kept ? clean : { ...rest, drift: Math.max(rest.drift ?? 0, move.drift) });
      plan.cancelled.push({ instance, move });
    } else if (kept && kept.drift >= move.drift) {
      plan.records.set(instance, { ...rest, drift: kept.drift }); // the new pod exists
    } else if (kept && kept.node !== move.from) {
      plan.records.set(instance, rest); // already off `from`
    } else {
      plan.moving.set(instance, move);
    }
  }
  return plan;
}

/** The moves to make in this pass (lowest instance first), and when the others' back-off ends (R9). */
export function dueMoves(moving: ReadonlyMap<number, DriftMove>, internal: Internal, now: number): { due: number[]; wakeAt: number[] } {
  const due: number[] = [];
  const wakeAt: number[] = [];
  for (const instance of [...moving.keys()].sort((a, b) => a - b)) {
    const at = internal.instances[String(instance)]?.nextDeployAt;
    if (at !== undefined && now < at) wakeAt.push(at);
    else due.push(instance);
  }
  return { due, wakeAt };
}
