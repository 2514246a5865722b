// The status of a key whose stored spec cannot be decoded. Pure.
//
// Invariant: a spec that cannot be read must not look deleted (that would remove its pods) nor be
// acted on: the pass touches nothing and says why in the status, keeping everything else the
// previous status said (its pods, its bookkeeping), until the spec is fixed. Shared by the PodGroup
// controller (state "failed") and the Dependency controller (state "degraded").

/** The lastError of a status whose spec cannot be read; `invalid` is the decoder's reason. */
export function unreadableSpecError(invalid: string | undefined): string {
  return `the stored spec cannot be read (${invalid}); nothing is changed until it is fixed`;
}

/**
 * The previous status (or `empty` when there is none) with `state`, the reason as lastError and
 * updatedAt = `now` (wall-clock ms).
 */
export function unreadableSpecStatus<S extends { state: string; lastError: string; updatedAt: string }>(
  prev: S | undefined,
  empty: S,
  state: S["state"],
  invalid: string | undefined,
  now: number,
): S {
  return { ...(prev ?? empty), state, lastError: unreadableSpecError(invalid), updatedAt: new Date(now).toISOString() };
}
