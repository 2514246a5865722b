// Token expiry is wall-clock time (an ISO timestamp in the record), so the console reads a wall
// clock, not runtime/clock.ts's monotonic one. Tests inject a fixed or moving one.
export interface WallClock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemWallClock: WallClock = { now: () => Date.now() };
