// The console's wall clock is every API's (api/http/clock.ts): token expiry is wall-clock time.
export { systemWallClock, type WallClock } from "../http/clock.ts";
