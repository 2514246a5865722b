// Wall-clock time of the APIs, injected: record timestamps (createdAt, updatedAt), token expiry,
// `since` parameters. Stored times are wall-clock (ISO timestamps), so the APIs read a wall clock,
// not runtime/clock.ts's monotonic one (docs/development.md, "Conventions": time is injected so
// that it can be tested). Tests inject a fixed or moving one.
export interface WallClock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemWallClock: WallClock = { now: () => Date.now() };

/** The clock's time as an ISO 8601 timestamp (UTC). */
export function isoNow(clock: WallClock): string {
  return new Date(clock.now()).toISOString();
}
