// The console (docs/console.md): apps, maintainers, access tokens and role checks. Server assembly:
// createConsoleApi for the routes, ensureAdminToken once on start.
export { createConsoleApi, type ConsoleApiOptions } from "./api.ts";
export { AdminTokenError, ensureAdminToken, type EnsureAdminTokenOptions } from "./admin-token.ts";
export { systemWallClock, type WallClock } from "./clock.ts";
export { authErrorHandler, authNotFoundHandler, forbidden, unauthorized } from "./errors.ts";
export { appKey, appNamePattern, appsPrefix, tokenKey, tokensPrefix, type AppRecord, type Role, type TokenRecord } from "./records.ts";
export { generateToken, hashSecret, parseToken } from "./tokens.ts";
export {
  createSsoLogin,
  defaultSsoTokenTtlMs,
  ensureSsoStateKey,
  isLoopbackRedirectUri,
  SsoError,
  ssoApi,
  type SsoFinished,
  type SsoFinishInput,
  type SsoLogin,
  type SsoSettings,
  type SsoStarted,
  type SsoStartInput,
} from "./sso.ts";
