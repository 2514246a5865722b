// A real OpenID Provider (oidc-provider 8.8.1) on a loopback port, plus a scripted, non-browser
// login through it, for the SSO auth proxy's integration tests.
//
//   const idp = await startTestProvider({
//     clients: [{ client_id: "proxy", client_secret: "s3cret", redirect_uris: [`${proxyUrl}/_sso/`] }],
//     accounts: { alice: { email: "alice@example.com", groups: ["dev"] }, bob: { email: "bob@example.com", scopes: ["password"] } },
//   });
//   const jar = new CookieJar();
//   const { final, hops } = await browse(jar, `${proxyUrl}/page`, { login: { sub: "alice" } });
//   ...
//   await idp.stop();
//
// Everything the library would otherwise warn about as "development only" is configured
// explicitly (own signing keys, cookie keys, TTLs, storage, interaction routes, error page), so the
// provider prints nothing in a normal run; its server errors, which it only reports to `debug`, are
// printed and kept in `serverErrors` instead.
import { generateKeyPair as generateKeyPairCb, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { importJWK, SignJWT, calculateJwkThumbprint, type JWK, type JWTPayload, type JWTHeaderParameters } from "jose";
import {
  Provider,
  type Adapter,
  type AdapterPayload,
  type Grant,
  type KoaContextWithOIDC,
} from "oidc-provider";

const generateKeyPair = promisify(generateKeyPairCb);

export interface TestAccount {
  email: string;
  /** Default true. */
  email_verified?: boolean;
  /** Default []. */
  groups?: string[];
  /**
   * The only scopes a login as this account is ever granted (besides `openid`, always granted).
   * Requested scopes outside this list are rejected (not an error: the code flow succeeds with
   * fewer scopes), and the ID token's `scope` claim lists only the granted ones. Default: every
   * requested scope the provider supports.
   */
  scopes?: string[];
  /** When set, the login form must be submitted with this password; default: any password. */
  password?: string;
}

export interface TestClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
  /** Default "client_secret_post" (client_id and client_secret in the token request body). */
  token_endpoint_auth_method?: "client_secret_post" | "client_secret_basic";
  /**
   * Default "web" (redirect URIs match exactly). "native": an http loopback redirect URI matches on
   * any port (RFC 8252 section 7.3), so `http://127.0.0.1/callback` admits a CLI's port-0 listener.
   */
  application_type?: "web" | "native";
}

export interface TestProviderOptions {
  clients: TestClient[];
  /**
   * sub (= login name) → account. Read on every login and token request, so a test may change an
   * account (e.g. its groups) between logins.
   */
  accounts: Record<string, TestAccount>;
  /** Default 300. */
  idTokenTtlSeconds?: number;
  /** Authorization requests without a PKCE code_challenge are refused (error=invalid_request). Default true. */
  pkceRequired?: boolean;
  /** Default: a free port on 127.0.0.1. */
  port?: number;
  /** Scopes the provider accepts besides DEFAULT_SCOPES (unsupported scopes in a request are dropped). */
  extraScopes?: string[];
}

/** Scopes always supported: the auth_type words the proxy requires, plus the usual OIDC ones. */
export const DEFAULT_SCOPES = ["openid", "email", "profile", "groups", "password", "sms", "otp"] as const;

/** Response header (value "login") marking the provider's login page, which `browse` fills in. */
export const LOGIN_PAGE_HEADER = "x-test-provider-interaction";

export interface TestProvider {
  /** http://127.0.0.1:PORT (no trailing slash). */
  issuer: string;
  /**
   * Requests received, by URL path ("/jwks", "/token", "/.well-known/openid-configuration",
   * "/auth", "/interaction/<uid>", ...), so tests can assert caching and cool-downs.
   */
  hits: Map<string, number>;
  /**
   * The provider's RSA signing keys as private JWKs (kid, alg "RS256", use "sig"), newest first:
   * `signingKeys[0]` signs new ID tokens, older ones stay published in /jwks. JWKs rather than
   * KeyObjects because a JWK carries its kid, which a crafted token needs in its header, and
   * `importJWK` turns it into a key; `signToken` does both.
   */
  readonly signingKeys: JWK[];
  /**
   * Sign `claims` exactly as given (nothing added, so tests control iss/aud/exp/nonce) with the
   * provider's real key: RS256, header { alg, kid, typ: "JWT", ...header }. `kid` picks an older
   * key; default the current one.
   */
  signToken(claims: JWTPayload, opts?: { kid?: string; header?: Partial<JWTHeaderParameters> }): Promise<string>;
  /**
   * Add a new signing key (new kid) and make it the one that signs new ID tokens; the older keys
   * stay in /jwks. Sessions, grants and codes survive (storage is shared).
   */
  rotateKey(): Promise<void>;
  /** Errors the provider answered with server_error (500), in order. */
  serverErrors: Error[];
  stop(): Promise<void>;
}

const INTERACTION_PATH = /^\/interaction\/([^/]+)(\/abort)?$/;

export async function startTestProvider(opts: TestProviderOptions): Promise<TestProvider> {
  const supportedScopes = [...new Set<string>([...DEFAULT_SCOPES, ...(opts.extraScopes ?? [])])];
  const pkceRequired = opts.pkceRequired ?? true;
  const idTokenTtl = opts.idTokenTtlSeconds ?? 300;
  const cookieKeys = [randomBytes(32).toString("base64url")];
  const storage = new Map<string, StoredEntry>();
  const TestAdapter = adapterOver(storage);
  const hits = new Map<string, number>();
  const serverErrors: Error[] = [];
  let keys: JWK[] = [await newSigningKey()];

  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // Scopes a login as `accountId` gets out of `requested`: openid always, others only when the
  // provider supports them and the account allows them. The rest are recorded as rejected, which
  // satisfies the consent check ("encountered" = granted + rejected) without a consent prompt.
  const applyScopes = (grant: Grant, accountId: string, requested: Iterable<string>): void => {
    const allowed = opts.accounts[accountId]?.scopes;
    const granted: string[] = [];
    const rejected: string[] = [];
    for (const scope of requested) {
      if (!supportedScopes.includes(scope)) continue;
      if (scope === "openid" || allowed === undefined || allowed.includes(scope)) granted.push(scope);
      else rejected.push(scope);
    }
    if (granted.length > 0) grant.addOIDCScope(granted.join(" "));
    if (rejected.length > 0) grant.rejectOIDCScope(rejected.join(" "));
  };

  const build = (jwks: JWK[]): Provider => {
    const p = new Provider(issuer, {
      adapter: TestAdapter,
      clients: opts.clients.map((c) => ({
        client_id: c.client_id,
        client_secret: c.client_secret,
        redirect_uris: c.redirect_uris,
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: c.token_endpoint_auth_method ?? "client_secret_post",
        id_token_signed_response_alg: "RS256",
        ...(c.application_type !== undefined ? { application_type: c.application_type } : {}),
      })),
      // First key = the signing key: the keystore picks the first matching RS256 key.
      jwks: { keys: jwks },
      cookies: { keys: cookieKeys },
      scopes: supportedScopes,
      // All identity claims hang off `openid` and conformIdTokenClaims is off, so they land in the
      // ID token itself (the proxy reads only the ID token) rather than only in userinfo.
      claims: { openid: ["sub", "email", "email_verified", "groups", "scope"] },
      conformIdTokenClaims: false,
      features: { devInteractions: { enabled: false } },
      pkce: { methods: ["S256"], required: () => pkceRequired },
      ttl: {
        IdToken: idTokenTtl,
        AccessToken: 600,
        AuthorizationCode: 60,
        Interaction: 600,
        Session: 3600,
        Grant: 3600,
        RefreshToken: 3600,
      },
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      findAccount: (_ctx, sub) => {
        if (!Object.hasOwn(opts.accounts, sub)) return undefined;
        return {
          accountId: sub,
          // `scope` is the scope of the token being issued, i.e. already filtered by the grant.
          claims: (_use, scope) => {
            const a = opts.accounts[sub];
            return { sub, email: a?.email, email_verified: a?.email_verified ?? true, groups: a?.groups ?? [], scope };
          },
        };
      },
      // Auto-consent: every login gets a grant for the requested scopes the account allows.
      loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
        const { client, account, session, result, requestParamOIDCScopes } = ctx.oidc;
        if (!account) return undefined;
        const id = result?.consent?.grantId ?? session.grantIdFor(client.clientId);
        let grant = id ? await ctx.oidc.provider.Grant.find(id) : undefined;
        if (!grant || grant.accountId !== account.accountId) {
          grant = new ctx.oidc.provider.Grant({ accountId: account.accountId, clientId: client.clientId });
        }
        applyScopes(grant, account.accountId, requestParamOIDCScopes);
        await grant.save();
        return grant;
      },
      renderError: (ctx, out) => {
        ctx.type = "json";
        ctx.body = out;
      },
      clientBasedCORS: () => false,
    });
    p.on("server_error", (_ctx, err) => {
      const e = err instanceof Error ? err : new Error(String(err));
      serverErrors.push(e);
      console.error("test oidc-provider server_error:", e);
    });
    return p;
  };

  let provider = build(keys);
  let handle = provider.callback();

  const interaction = async (req: IncomingMessage, res: ServerResponse, uid: string, abort: boolean): Promise<void> => {
    let details;
    try {
      details = await provider.interactionDetails(req, res);
    } catch (e) {
      send(res, 400, "text/plain", `no such interaction: ${(e as Error).message}`);
      return;
    }
    if (details.uid !== uid) {
      send(res, 400, "text/plain", "interaction cookie does not match the URL");
      return;
    }
    const deny = () =>
      provider.interactionFinished(req, res, { error: "access_denied", error_description: "End-User aborted interaction" }, { mergeWithLastSubmission: false });
    if (abort) return deny();
    if (details.prompt.name !== "login") {
      // Not expected (loadExistingGrant consents), but answer a consent prompt the same way.
      const accountId = details.session?.accountId;
      const clientId = String(details.params.client_id ?? "");
      if (!accountId) {
        send(res, 400, "text/plain", `unexpected prompt ${details.prompt.name} without a session`);
        return;
      }
      const found = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
      const grant = found ?? new provider.Grant({ accountId, clientId });
      applyScopes(grant, accountId, String(details.params.scope ?? "").split(" "));
      const grantId = await grant.save();
      return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    }
    if (req.method === "GET") {
      loginPage(res, uid);
      return;
    }
    if (req.method !== "POST") {
      send(res, 405, "text/plain", "method not allowed");
      return;
    }
    const form = await readForm(req);
    if (form.has("abort")) return deny();
    const sub = form.get("login") ?? "";
    const account = Object.hasOwn(opts.accounts, sub) ? opts.accounts[sub] : undefined;
    if (!account || (account.password !== undefined && form.get("password") !== account.password)) {
      loginPage(res, uid, "invalid login or password");
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: sub } }, { mergeWithLastSubmission: false });
  };

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", issuer).pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const m = INTERACTION_PATH.exec(path);
    if (!m) {
      void handle(req, res);
      return;
    }
    interaction(req, res, m[1] ?? "", m[2] !== undefined).catch((e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e));
      serverErrors.push(err);
      console.error("test oidc-provider interaction error:", err);
      if (!res.headersSent) send(res, 500, "text/plain", err.message);
      else res.destroy();
    });
  });

  return {
    issuer,
    hits,
    get signingKeys() {
      return keys.map((k) => ({ ...k }));
    },
    async signToken(claims, o = {}) {
      const jwk = o.kid === undefined ? keys[0] : keys.find((k) => k.kid === o.kid);
      if (!jwk) throw new Error(`no signing key with kid ${o.kid}`);
      return new SignJWT(claims)
        .setProtectedHeader({ alg: "RS256", kid: jwk.kid, typ: "JWT", ...o.header })
        .sign(await importJWK(jwk, "RS256"));
    },
    async rotateKey() {
      // oidc-provider has no public API to change its keystore, so a new instance with the new key
      // first replaces the old one behind the same server; storage and cookie keys are shared.
      keys = [await newSigningKey(), ...keys];
      provider = build(keys);
      handle = provider.callback();
    },
    serverErrors,
    async stop() {
      await new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

async function newSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair("rsa", { modulusLength: 2048 });
  const { kty, n, e, d, p, q, dp, dq, qi } = privateKey.export({ format: "jwk" });
  const jwk: JWK = { kty, n, e, d, p, q, dp, dq, qi, alg: "RS256", use: "sig" };
  jwk.kid = await calculateJwkThumbprint(jwk);
  return jwk;
}

interface StoredEntry {
  payload: AdapterPayload;
  expiresAt?: number;
}

// Per-provider storage (the bundled in-memory adapter keeps one module-wide store shared by every
// provider in the process, and warns); shared by the instances rotateKey creates.
function adapterOver(store: Map<string, StoredEntry>) {
  const live = (key: string): StoredEntry | undefined => {
    const entry = store.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry;
  };
  const put = (key: string, payload: AdapterPayload, expiresIn: number) =>
    store.set(key, { payload, expiresAt: expiresIn > 0 ? Date.now() + expiresIn * 1000 : undefined });
  const grantable = new Set(["AccessToken", "AuthorizationCode", "RefreshToken", "DeviceCode", "BackchannelAuthenticationRequest"]);

  return class TestAdapter implements Adapter {
    constructor(private readonly model: string) {}

    private key(id: string): string {
      return `${this.model}:${id}`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      const key = this.key(id);
      if (this.model === "Session" && typeof payload.uid === "string") {
        put(`sessionUid:${payload.uid}`, { id }, expiresIn);
      }
      if (grantable.has(this.model) && typeof payload.grantId === "string") {
        const grantKey = `grant:${payload.grantId}`;
        const keysOfGrant = (live(grantKey)?.payload.keys as string[] | undefined) ?? [];
        store.set(grantKey, { payload: { keys: [...keysOfGrant, key] } });
      }
      if (typeof payload.userCode === "string") {
        put(`userCode:${payload.userCode}`, { id }, expiresIn);
      }
      put(key, payload, expiresIn);
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      return live(this.key(id))?.payload;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const id = live(`sessionUid:${uid}`)?.payload.id;
      return typeof id === "string" ? this.find(id) : undefined;
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      const id = live(`userCode:${userCode}`)?.payload.id;
      return typeof id === "string" ? this.find(id) : undefined;
    }

    async consume(id: string): Promise<void> {
      const entry = live(this.key(id));
      if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
    }

    async destroy(id: string): Promise<void> {
      store.delete(this.key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      const grantKey = `grant:${grantId}`;
      for (const key of (store.get(grantKey)?.payload.keys as string[] | undefined) ?? []) store.delete(key);
      store.delete(grantKey);
    }
  };
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": `${type}; charset=utf-8`, "cache-control": "no-store" });
  res.end(body);
}

function loginPage(res: ServerResponse, uid: string, error?: string): void {
  const u = encodeURIComponent(uid);
  res.setHeader(LOGIN_PAGE_HEADER, "login");
  send(
    res,
    200,
    "text/html",
    `<!doctype html><title>Sign-in</title>${error ? `<p class="error">${escapeHtml(error)}</p>` : ""}` +
      `<form method="post" action="/interaction/${u}"><input name="login" autofocus>` +
      `<input name="password" type="password"><button type="submit">Sign in</button></form>` +
      `<a href="/interaction/${u}/abort">Cancel</a>`,
  );
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error("login form body too large");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

// ---------------------------------------------------------------------------------------------
// Browser substitute

interface StoredCookie {
  name: string;
  value: string;
  path: string;
  /** ms since the epoch; undefined = session cookie. */
  expiresAt?: number;
}

/**
 * Cookies per origin (scheme://host:port), from Set-Cookie headers: Path (default: the request
 * path up to its last "/"; "/a" matches "/a" and "/a/b", not "/ab"), Max-Age (wins over Expires), Max-Age<=0 or a past Expires
 * deletes. Domain, Secure, HttpOnly and SameSite are ignored. Note a real browser keys cookies by
 * host, not port, so it would also send one 127.0.0.1 port's cookies to another.
 */
export class CookieJar {
  readonly #byOrigin = new Map<string, StoredCookie[]>();

  /** Record the Set-Cookie headers of a response to `url` (browse does this for every hop). */
  store(url: string | URL, setCookie: string[]): void {
    const u = new URL(url);
    for (const header of setCookie) this.#storeOne(u, header);
  }

  /** The Cookie header value a browser would send to `url` ("" when none). */
  cookieHeader(url: string | URL): string {
    const u = new URL(url);
    return this.#live(u.origin)
      .filter((c) => pathMatches(u.pathname, c.path))
      .sort((a, b) => b.path.length - a.path.length)
      .map((c) => `${c.name}=${c.value}`)
      .join("; ");
  }

  /** The value of cookie `name` for `origin` (any URL of it); with several paths, the longest path's. */
  get(origin: string | URL, name: string): string | undefined {
    return this.#live(new URL(origin).origin)
      .filter((c) => c.name === name)
      .sort((a, b) => b.path.length - a.path.length)[0]?.value;
  }

  /** Every live cookie of `origin`. */
  list(origin: string | URL): StoredCookie[] {
    return this.#live(new URL(origin).origin).map((c) => ({ ...c }));
  }

  /** Set (or replace) a cookie by hand, e.g. a forged or tampered session cookie. */
  set(origin: string | URL, name: string, value: string, path = "/"): void {
    this.#put(new URL(origin).origin, { name, value, path });
  }

  delete(origin: string | URL, name: string): void {
    const o = new URL(origin).origin;
    this.#byOrigin.set(o, (this.#byOrigin.get(o) ?? []).filter((c) => c.name !== name));
  }

  #live(origin: string): StoredCookie[] {
    const now = Date.now();
    const kept = (this.#byOrigin.get(origin) ?? []).filter((c) => c.expiresAt === undefined || c.expiresAt > now);
    this.#byOrigin.set(origin, kept);
    return kept;
  }

  #put(origin: string, cookie: StoredCookie): void {
    const others = (this.#byOrigin.get(origin) ?? []).filter((c) => !(c.name === cookie.name && c.path === cookie.path));
    this.#byOrigin.set(origin, [...others, cookie]);
  }

  #storeOne(url: URL, header: string): void {
    const [pair = "", ...attrs] = header.split(";");
    const eq = pair.indexOf("=");
    if (eq < 0) return;
    const name = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    if (name === "") return;
    let path = defaultPath(url.pathname);
    let maxAge: number | undefined;
    let expires: number | undefined;
    for (const attr of attrs) {
      const i = attr.indexOf("=");
      const key = (i < 0 ? attr : attr.slice(0, i)).trim().toLowerCase();
      const val = i < 0 ? "" : attr.slice(i + 1).trim();
      if (key === "path" && val.startsWith("/")) path = val;
      else if (key === "max-age" && /^-?\d+$/.test(val)) maxAge = Number(val);
      else if (key === "expires") {
        const t = Date.parse(val);
        if (!Number.isNaN(t)) expires = t;
      }
    }
    const expiresAt = maxAge !== undefined ? Date.now() + maxAge * 1000 : expires;
    if (expiresAt !== undefined && expiresAt <= Date.now()) {
      const o = url.origin;
      this.#byOrigin.set(o, (this.#byOrigin.get(o) ?? []).filter((c) => !(c.name === name && c.path === path)));
      return;
    }
    this.#put(url.origin, { name, value, path, expiresAt });
  }
}

function defaultPath(uriPath: string): string {
  if (!uriPath.startsWith("/")) return "/";
  const last = uriPath.lastIndexOf("/");
  return last <= 0 ? "/" : uriPath.slice(0, last);
}

function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  if (!requestPath.startsWith(cookiePath)) return false;
  return cookiePath.endsWith("/") || requestPath[cookiePath.length] === "/";
}

export interface Hop {
  method: string;
  url: string;
  status: number;
  location?: string;
  /** The raw Set-Cookie headers of this response. */
  setCookie: string[];
}

export interface BrowseOptions {
  /**
   * Log in when the provider's login page appears: sub = login name; password only matters for
   * accounts that have one. `deny` cancels the login instead (the client gets error=access_denied).
   * Without `login`, the login page is returned as the final response.
   */
  login?: { sub: string; password?: string; deny?: boolean };
  /** Checked with every redirect target; true = do not follow it, return now (stopped: true). */
  stopAt?: (url: URL) => boolean;
  /** Extra request headers for every hop (a Cookie header given here is sent before the jar's). */
  headers?: Record<string, string>;
}

export interface BrowseResult {
  hops: Hop[];
  /** The last response: not a redirect, or (stopped) the redirect whose target stopAt refused. */
  final: Response;
  /** The URL of `final`, or (stopped) the redirect target that was not followed. */
  finalUrl: string;
  stopped: boolean;
}

const MAX_HOPS = 20;

/**
 * Follow redirects from `url` like a browser (GET; 307/308 repeat method and body), with cookies
 * from `jar`, submitting the provider's login form once per login page when `opts.login` is given.
 * Ends at the first response that is not a redirect (and not a login page to fill in), or when
 * `stopAt` refuses a redirect target. Bodies of intermediate responses are discarded; `final`'s is
 * left unread. At most 20 requests.
 */
export async function browse(jar: CookieJar, url: string, opts: BrowseOptions = {}): Promise<BrowseResult> {
  const hops: Hop[] = [];
  const submitted = new Set<string>();
  let current = new URL(url);
  let method = "GET";
  let body: string | undefined;
  while (hops.length < MAX_HOPS) {
    const headers: Record<string, string> = { ...opts.headers };
    const cookies = [headers.cookie ?? headers.Cookie, jar.cookieHeader(current)].filter((c) => c).join("; ");
    delete headers.Cookie;
    if (cookies) headers.cookie = cookies;
    if (body !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
    const res = await fetch(current, { method, headers, body, redirect: "manual" });
    const setCookie = res.headers.getSetCookie();
    jar.store(current, setCookie);
    const location = res.headers.get("location") ?? undefined;
    hops.push({ method, url: current.href, status: res.status, location, setCookie });

    if ([301, 302, 303, 307, 308].includes(res.status) && location !== undefined) {
      const next = new URL(location, current);
      if (opts.stopAt?.(next)) return { hops, final: res, finalUrl: next.href, stopped: true };
      await res.body?.cancel();
      if (res.status !== 307 && res.status !== 308) {
        method = "GET";
        body = undefined;
      }
      current = next;
      continue;
    }

    if (opts.login && res.headers.get(LOGIN_PAGE_HEADER) === "login" && !submitted.has(current.href)) {
      submitted.add(current.href);
      await res.body?.cancel();
      const { sub, password = "", deny } = opts.login;
      method = "POST";
      body = new URLSearchParams(deny ? { abort: "1" } : { login: sub, password }).toString();
      continue;
    }

    return { hops, final: res, finalUrl: current.href, stopped: false };
  }
  throw new Error(`browse: more than ${MAX_HOPS} requests: ${hops.map((h) => `${h.method} ${h.url} ${h.status}`).join(" -> ")}`);
}
