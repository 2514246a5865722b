// Single sign-on for the console's users (docs/console.md#single-sign-on): an OpenID Connect
// authorization code login with PKCE (S256), a nonce and a signed state, done by the console so
// that the client secret never leaves it (as `nomad login` does). Its result is an ordinary
// console access token (records.ts; origin "sso") for the user's verified e-mail:
//
//   POST /api/v1/sso/start  {redirect_uri, code_challenge}                       200 {authorization_url, state}
//   POST /api/v1/sso/token  {code, state, code_verifier, redirect_uri}           200 {id, token, user, role, expires_at}
//
// Over HTTP redirect_uri must be a loopback http URL with a port (`capstan login -sso` listens
// there); in-process callers (the web console) call `SsoLogin.start`/`finish` with their own
// callback URL. Without -oidc-issuer both answer 404.
//
// The state is `v1.<payload>.<mac>`: base64url JSON {r: redirect_uri, c: code_challenge, n: nonce,
// x: expiry in ms, i: random id}, and an HMAC-SHA256 of it under a key every console replica shares
// (kept in the store at /platform/console/sso-state-key, made on the first start). It expires after
// 10 minutes. A state that finished its checks is spent before the code is exchanged: this process
// refuses it again (another replica would not; the provider spends the code once in any case).
//
// Nothing here logs a token, a code, a verifier or the client secret.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { Hono, type Context } from "hono";
import { z } from "zod";
import { discoverEndpoints, OidcClient, type OidcEndpoints } from "../../adapters/identity/oidc.ts";
import type { Store } from "../../adapters/store/store.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { isLoopbackHost } from "../../runtime/loopback.ts";
import { ApiError, readJsonBody, type ErrorBody } from "../http/index.ts";
import { systemWallClock, type WallClock } from "./clock.ts";
import { authErrorHandler } from "./errors.ts";
import { consolePrefix, decodeRecord, Email } from "./records.ts";
import { issueToken, TokenIdCollisionError, type IssuedToken } from "./issued-tokens.ts";

export const ssoStateKeyKey = `${consolePrefix}sso-state-key`;
/** How long a login may take from start to token. */
export const ssoStateTtlMs = 10 * 60_000;
export const defaultSsoTokenTtlMs = 12 * 3_600_000;
/** The `origin` of the token records SSO makes. */
export const ssoTokenOrigin = "sso";
export const ssoStartPath = "/api/v1/sso/start";
export const ssoTokenPath = "/api/v1/sso/token";

export interface SsoSettings {
  /** The provider (https://, or http:// on loopback only). */
  issuer: string;
  clientId: string;
  /** Never logged, never sent anywhere but the provider's token endpoint. */
  clientSecret: string;
  /** E-mails (lower-case) that log in as admin; every other verified e-mail logs in as user. */
  admins: readonly string[];
  /** Lifetime of the access tokens it makes. */
  tokenTtlMs: number;
  /** Endpoints given instead of discovery (tests); default discovery. */
  endpoints?: Partial<Omit<OidcEndpoints, "issuer">>;
}

export type SsoErrorCode = "BadRequest" | "Forbidden" | "NotFound" | "BadGateway" | "Unavailable" | "GatewayTimeout";

/**
 * A refused or failed login: an ApiError whose `status` and `code` are what the HTTP API answers
 * (with `cache-control: no-store`, as every answer of the login); a 400 names `field`.
 */
export class SsoError extends ApiError {
  override readonly name: string = "SsoError";
  declare readonly status: 400 | 403 | 404 | 502 | 503 | 504;
  constructor(
    status: 400 | 403 | 404 | 502 | 503 | 504,
    readonly code: SsoErrorCode,
    message: string,
    /** The offending field, for 400s. */
    field?: string,
  ) {
    const body = (status === 400 ? { code, message, details: field ? [{ path: field, message }] : [] } : { code, message }) as ErrorBody;
    super(status, body, { ...(field !== undefined ? { field } : {}), headers: { "cache-control": "no-store" } });
  }
}

const bad = (field: string, message: string) => new SsoError(400, "BadRequest", `${field}: ${message}`, field);

export interface SsoStartInput {
  /** Where the provider sends the browser back (the caller's callback). */
  redirectUri: string;
  /** base64url(sha256(code_verifier)), 43 characters. */
  codeChallenge: string;
}

export interface SsoStarted {
  /** Send the browser here. */
  authorizationUrl: string;
  /** The callback must carry this state back; give it to finish(). */
  state: string;
}

export interface SsoFinishInput {
  code: string;
  state: string;
  codeVerifier: string;
  redirectUri: string;
}

export interface SsoFinished {
  /** The new console access token (shown once). */
  token: string;
  tokenId: string;
  /** The verified e-mail, lower-cased. */
  user: string;
  role: "admin" | "user";
  /** ISO time. */
  expiresAt: string;
}

/** The login, for the HTTP API below and for in-process callers (the web console). */
export interface SsoLogin {
  start(input: SsoStartInput): Promise<SsoStarted>;
  finish(input: SsoFinishInput): Promise<SsoFinished>;
}

// ------------------------------------------------------------------------------------------------
// The state key.

const StateKeyRecord = z.object({ key: z.string().regex(/^[A-Za-z0-9_-]{43}$/), createdAt: z.string() });

/**
 * The HMAC key of SSO states from the store, made (32 random bytes, create-only put) when the store
 * holds none. Consoles starting together each make one; the first put wins and every one uses it.
 */
export async function ensureSsoStateKey(store: Store, clock: WallClock = systemWallClock): Promise<{ key: Buffer; created: boolean }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const kv = await store.get(ssoStateKeyKey);
    if (kv !== null) return { key: Buffer.from(decodeRecord(StateKeyRecord, kv.key, kv.value).key, "base64url"), created: false };
    const key = randomBytes(32);
    const record = { key: key.toString("base64url"), createdAt: new Date(clock.now()).toISOString() };
    const result = await store.put(ssoStateKeyKey, JSON.stringify(record), { expect: [{ key: ssoStateKeyKey, target: "createRevision", equals: 0 }] });
    if (result.succeeded) return { key, created: true };
  }
  throw new Error(`${ssoStateKeyKey} kept appearing and vanishing while the console tried to read it`);
}

// ------------------------------------------------------------------------------------------------
// Checks of the input.

const challengePattern = /^[A-Za-z0-9_-]{43}$/;
/** RFC 7636's 43 to 128 characters (docs/console.md, "Single sign-on", "Errors"). */
const verifierPattern = /^[A-Za-z0-9._~-]{43,128}$/;

/** An absolute http(s) URL without user, password or fragment: what any callback must be. */
function checkRedirectUri(uri: string, field = "redirect_uri"): URL {
  if (uri.length > 2000) throw bad(field, "must be at most 2000 characters");
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw bad(field, "must be an absolute URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw bad(field, "must be an http:// or https:// URL");
  if (u.username || u.password) throw bad(field, "must not carry a user or password");
  if (u.hash || uri.includes("#")) throw bad(field, "must not carry a #fragment");
  return u;
}

/**
 * True for the callback of a command-line client on this machine (docs/console.md, "The flow",
 * after RFC 8252's loopback rule):
 * http://127.0.0.1:PORT/..., http://[::1]:PORT/... or http://localhost:PORT/..., port explicit.
 */
export function isLoopbackRedirectUri(uri: string): boolean {
  let u: URL;
  try {
    u = checkRedirectUri(uri);
  } catch {
    return false;
  }
  return u.protocol === "http:" && u.port !== "" && isLoopbackHost(u.hostname);
}

function s256(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

// ------------------------------------------------------------------------------------------------
// The login.

interface StatePayload {
  /** redirect_uri */
  r: string;
  /** code_challenge */
  c: string;
  /** nonce */
  n: string;
  /** expiry, ms since the epoch */
  x: number;
  /** random id: the key of the used-state set */
  i: string;
}

const StatePayloadSchema = z.strictObject({ r: z.string(), c: z.string(), n: z.string(), x: z.number(), i: z.string() });

/** Spent states remembered at most (each about 60 bytes); past it the oldest go first. */
const maxUsedStates = 100_000;

export interface SsoLoginOptions {
  store: Store;
  settings: SsoSettings;
  /** The shared HMAC key (ensureSsoStateKey). */
  stateKey: Buffer;
  clock?: WallClock;
  log?: Logger;
  /** Timeout of each call to the provider (default 10 s; discovery and JWKS at most 5 s). */
  timeoutMs?: number;
}

export function createSsoLogin(opts: SsoLoginOptions): SsoLogin {
  const { store, settings, stateKey } = opts;
  const clock = opts.clock ?? systemWallClock;
  const log = (opts.log ?? silentLogger).child({ api: "sso" });
  // The token a login makes is written down like every other token's creation (docs/security.md,
  // "Audit"): at info level whatever the process's log level.
  const audit = log.level === "silent" ? log : log.child({ audit: true }, { level: "info" });
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const admins = new Set(settings.admins.map((a) => a.trim().toLowerCase()));
  const used = new Map<string, number>();

  // The provider, discovered on first use and kept; a failed discovery is tried again by the next
  // login (concurrent logins share one attempt).
  let client: OidcClient | undefined;
  let discovering: Promise<OidcClient> | undefined;
  const provider = async (): Promise<OidcClient> => {
    if (client !== undefined) return client;
    discovering ??= discoverEndpoints(settings.issuer, settings.endpoints ?? {}, Math.min(timeoutMs, 5_000))
      .then((endpoints) => {
        client = new OidcClient(endpoints, { clientId: settings.clientId, clientSecret: settings.clientSecret, timeoutMs });
        log.info({ issuer: endpoints.issuer, authorization: endpoints.authorization, token: endpoints.token }, "identity provider ready");
        return client;
      })
      .finally(() => (discovering = undefined));
    try {
      return await discovering;
    } catch (e) {
      log.warn({ issuer: settings.issuer, err: (e as Error).message }, "identity provider not reachable");
      throw new SsoError(503, "Unavailable", `the identity provider ${settings.issuer} is not reachable (${(e as Error).message}); retry`);
    }
  };

  const mac = (text: string) => createHmac("sha256", stateKey).update(`sso-state|${text}`).digest("base64url");

  const sign = (payload: StatePayload): string => {
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    return `v1.${body}.${mac(body)}`;
  };

  const open = (state: string): StatePayload => {
    const parts = state.split(".");
    if (state.length > 4096 || parts.length !== 3 || parts[0] !== "v1") throw bad("state", "is malformed: give the state /api/v1/sso/start answered");
    // The MAC compared as the exact string: decoding would accept variants of one value.
    if (!sameText(parts[2]!, mac(parts[1]!))) throw bad("state", "was not issued by this console (its signature does not verify)");
    let payload: StatePayload;
    try {
      payload = StatePayloadSchema.parse(JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")));
    } catch {
      throw bad("state", "is malformed");
    }
    const now = clock.now();
    if (payload.x <= now) throw bad("state", "has expired (a login must finish within 10 minutes of its start): start again");
    if (used.has(payload.i)) throw bad("state", "was already used: start again");
    return payload;
  };

  const spend = (payload: StatePayload) => {
    const now = clock.now();
    for (const [id, until] of used) {
      if (until > now && used.size < maxUsedStates) break;
      used.delete(id);
    }
    used.set(payload.i, payload.x);
  };

  return {
    async start(input) {
      checkRedirectUri(input.redirectUri);
      if (!challengePattern.test(input.codeChallenge)) throw bad("code_challenge", "must be base64url(sha256(code_verifier)): 43 characters A-Z a-z 0-9 - _ (PKCE S256)");
      const oidc = await provider();
      const nonce = randomBytes(16).toString("base64url");
      const state = sign({ r: input.redirectUri, c: input.codeChallenge, n: nonce, x: clock.now() + ssoStateTtlMs, i: randomBytes(12).toString("base64url") });
      const url = new URL(oidc.endpoints.authorization);
      const params: Record<string, string> = {
        response_type: "code",
        client_id: settings.clientId,
        redirect_uri: input.redirectUri,
        scope: "openid email",
        state,
        nonce,
        code_challenge: input.codeChallenge,
        code_challenge_method: "S256",
      };
      for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
      return { authorizationUrl: url.href, state };
    },

    async finish(input) {
      if (typeof input.code !== "string" || input.code === "" || input.code.length > 4096) throw bad("code", "must be the code of the callback (1 to 4096 characters)");
      if (!verifierPattern.test(input.codeVerifier)) throw bad("code_verifier", "must be 43 to 128 characters A-Z a-z 0-9 - . _ ~ (RFC 7636)");
      checkRedirectUri(input.redirectUri);
      const payload = open(input.state);
      if (payload.r !== input.redirectUri) throw bad("redirect_uri", "differs from the redirect_uri this login started with");
      if (!sameText(s256(input.codeVerifier), payload.c)) throw bad("code_verifier", "does not match the code_challenge this login started with");
      // Spent before the exchange: a code is tried once.
      spend(payload);
      const oidc = await provider();
      const exchanged = await oidc.exchangeCode(input.code, input.redirectUri, input.codeVerifier);
      if (!exchanged.ok) {
        log.info({ status: exchanged.status, reason: exchanged.reason }, "sso login refused");
        if (exchanged.status === 403) throw new SsoError(400, "BadRequest", `${exchanged.reason}: the code is spent, expired or not this login's; start again`, "code");
        if (exchanged.status === 504) throw new SsoError(504, "GatewayTimeout", `the identity provider's ${exchanged.reason}`);
        throw new SsoError(502, "BadGateway", `the identity provider's ${exchanged.reason}`);
      }
      const verified = await oidc.verifyIdToken(exchanged.idToken);
      if (!verified.ok) {
        log.info({ reason: verified.reason }, "sso login refused");
        if (/email/.test(verified.reason)) throw new SsoError(403, "Forbidden", `the identity provider gave no usable e-mail address (${verified.reason}); the console logs in verified e-mail addresses only`);
        throw new SsoError(502, "BadGateway", `the identity provider's ID token does not verify (${verified.reason})`);
      }
      const id = verified.identity;
      if (id.nonce === undefined || !sameText(id.nonce, payload.n)) {
        log.info({ reason: "nonce" }, "sso login refused");
        throw new SsoError(403, "Forbidden", "the ID token was not issued for this login (its nonce differs); start again");
      }
      if (!id.emailVerified) {
        log.info({ user: id.email, reason: "email not verified" }, "sso login refused");
        throw new SsoError(403, "Forbidden", `the identity provider does not say that ${id.email} is verified (email_verified must be true); the console logs in verified e-mail addresses only`);
      }
      const email = Email.safeParse(id.email);
      if (!email.success) throw new SsoError(403, "Forbidden", "the identity provider's e-mail claim is not an e-mail address the console takes");
      const user = email.data;
      const role = admins.has(user) ? "admin" : "user";
      let issued: IssuedToken;
      try {
        issued = await issueToken(store, { user, role, ttlMs: settings.tokenTtlMs, origin: ssoTokenOrigin, nowMs: clock.now() });
      } catch (e) {
        if (e instanceof TokenIdCollisionError) throw new SsoError(503, "Unavailable", "token id collision; start again");
        throw e;
      }
      audit.info({ tokenId: issued.id, user, role, expiresAt: issued.expiresAt, object: `token/${issued.id}`, outcome: "allowed" }, "sso login: token created");
      return { token: issued.token, tokenId: issued.id, user, role, expiresAt: issued.expiresAt };
    },
  };
}

// ------------------------------------------------------------------------------------------------
// The HTTP API.

const text = (max: number) => z.string().max(max, `must be at most ${max} characters`);
const StartBody = z.strictObject({ redirect_uri: text(2000), code_challenge: text(200) });
const TokenBody = z.strictObject({ code: text(4096), state: text(4096), code_verifier: text(200), redirect_uri: text(2000) });

export const ssoOffMessage =
  "single sign-on is not configured on this console: start it with -oidc-issuer, -oidc-client-id and -oidc-client-secret-file (docs/console.md#single-sign-on)";

function requireLoopback(uri: string): void {
  if (!isLoopbackRedirectUri(uri)) {
    throw bad("redirect_uri", "must be a loopback callback with a port, http://127.0.0.1:PORT/..., http://[::1]:PORT/... or http://localhost:PORT/... (capstan login -sso listens there)");
  }
}

/** The routes (api.ts mounts them); `login` undefined: SSO is off, both answer 404. */
export function ssoApi(opts: { login: SsoLogin | undefined; log?: Logger }): Hono {
  const log = (opts.log ?? silentLogger).child({ api: "sso" });
  const app = new Hono();
  app.onError(authErrorHandler(log));
  const login = (): SsoLogin => {
    if (opts.login === undefined) throw new SsoError(404, "NotFound", ssoOffMessage);
    return opts.login;
  };

  app.post(ssoStartPath, async (c: Context) => {
    const sso = login();
    const body = await readJsonBody(c, StartBody, "sso start request");
    requireLoopback(body.redirect_uri);
    const started = await sso.start({ redirectUri: body.redirect_uri, codeChallenge: body.code_challenge });
    return c.json({ authorization_url: started.authorizationUrl, state: started.state }, 200, { "cache-control": "no-store" });
  });

  app.post(ssoTokenPath, async (c: Context) => {
    const sso = login();
    const body = await readJsonBody(c, TokenBody, "sso token request");
    requireLoopback(body.redirect_uri);
    const done = await sso.finish({ code: body.code, state: body.state, codeVerifier: body.code_verifier, redirectUri: body.redirect_uri });
    return c.json({ id: done.tokenId, token: done.token, user: done.user, role: done.role, expires_at: done.expiresAt }, 200, { "cache-control": "no-store" });
  });
  return app;
}
