// The auth proxy's OpenID provider, seen from the proxy (docs/authproxy.md#the-provider): its
// endpoints (from the discovery document, or given), its signing keys (JWKS, cached; refetched on
// an unknown key id at most once per cool-down), ID token checks and the code exchange. Every
// call to the provider has a timeout; failures come back as values naming what went wrong.
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { isLoopbackHost } from "../../runtime/loopback.ts";

export interface OidcEndpoints {
  issuer: string;
  authorization: string;
  token: string;
  jwks: string;
  /** RP-initiated logout, when the provider offers it. */
  endSession?: string;
}

export class DiscoveryError extends Error {
  override readonly name = "DiscoveryError";
}

/** Fetch `{issuer}/.well-known/openid-configuration` unless `given` names every endpoint. */
export async function discoverEndpoints(issuer: string, given: Partial<Omit<OidcEndpoints, "issuer">>, timeoutMs = 5_000): Promise<OidcEndpoints> {
  if (given.authorization && given.token && given.jwks) return { issuer, authorization: given.authorization, token: given.token, jwks: given.jwks, endSession: given.endSession };
  const url = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  let doc: Record<string, unknown>;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: "application/json" }, redirect: "error" });
    if (!res.ok) throw new DiscoveryError(`${url}: HTTP ${res.status}`);
    doc = (await res.json()) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof DiscoveryError) throw e;
    throw new DiscoveryError(`${url}: ${errorText(e)}`);
  }
  // OpenID Connect Discovery 1.0 section 4.3: the document's issuer must be the one asked for.
  // A trailing slash aside: the document's spelling is the one its ID tokens carry in iss.
  if (typeof doc.issuer !== "string" || doc.issuer.replace(/\/+$/, "") !== issuer.replace(/\/+$/, "")) {
    throw new DiscoveryError(`${url}: the document names issuer ${JSON.stringify(doc.issuer)}, not ${issuer}`);
  }
  const pick = (key: string, explicit: string | undefined): string => {
    if (explicit) return explicit;
    const v = doc[key];
    if (typeof v !== "string" || !/^https?:\/\//.test(v)) throw new DiscoveryError(`${url}: no ${key}`);
    // As for the configured endpoints: keys and tokens do not cross a network in clear.
    const u = new URL(v);
    if (u.protocol === "http:" && !isLoopbackHost(u.hostname)) throw new DiscoveryError(`${url}: ${key} ${v} is plain http to another machine`);
    return v;
  };
  const endSession = typeof doc.end_session_endpoint === "string" ? doc.end_session_endpoint : undefined;
  return {
    issuer: doc.issuer,
    authorization: pick("authorization_endpoint", given.authorization),
    token: pick("token_endpoint", given.token),
    jwks: pick("jwks_uri", given.jwks),
    ...(endSession ? { endSession } : {}),
  };
}

/** What the proxy reads from a verified ID token. */
export interface Identity {
  email: string;
  groups: string[] | undefined;
  scopes: ReadonlySet<string>;
  nonce: string | undefined;
  /** Seconds since the epoch. */
  exp: number;
  /**
   * The provider vouches for the e-mail (`email_verified` true, or "true"). The proxy only refuses
   * an explicit false; the console's SSO login needs this (docs/console.md#single-sign-on).
   */
  emailVerified: boolean;
}

export type VerifyResult = { ok: true; identity: Identity } | { ok: false; reason: string };

export type ExchangeResult =
  | { ok: true; idToken: string }
  /** status: what the proxy answers: 403 the provider refused, 502 unreachable or nonsense, 504 too slow. */
  | { ok: false; status: 403 | 502 | 504; reason: string };

export interface OidcClientOptions {
  clientId: string;
  clientSecret: string;
  /** Leeway for exp/nbf/iat between the provider's clock and ours. */
  clockToleranceSec?: number;
  timeoutMs?: number;
  /** Least time between two JWKS fetches for an unknown key id. */
  jwksCooldownMs?: number;
  /** Verified tokens kept (each is re-checked against its exp on every use). */
  cacheSize?: number;
}

// Asymmetric algorithms only: a remote JWKS never yields an HMAC key, and "none" is never taken.
const algorithms = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];

export class OidcClient {
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;
  private readonly verified = new Map<string, Identity>();
  private readonly clockTolerance: number;
  private readonly timeoutMs: number;
  private readonly cacheSize: number;

  constructor(
    readonly endpoints: OidcEndpoints,
    private readonly opts: OidcClientOptions,
  ) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.clockTolerance = opts.clockToleranceSec ?? 5;
    this.cacheSize = opts.cacheSize ?? 10_000;
    this.jwks = createRemoteJWKSet(new URL(endpoints.jwks), {
      timeoutDuration: Math.min(this.timeoutMs, 5_000),
      cooldownDuration: opts.jwksCooldownMs ?? 30_000,
      cacheMaxAge: 10 * 60_000,
    });
  }

  /**
   * Check an ID token: signature by the provider's keys, not expired (nor issued or valid only in
   * the future), `iss`, `aud` (and `azp` when there are several audiences), an e-mail that is not
   * marked unverified. A token that passed once is remembered until its exp, so a session costs one
   * signature check, not one per request.
   */
  async verifyIdToken(token: string): Promise<VerifyResult> {
    const known = this.cachedIdToken(token);
    if (known !== undefined) return known;
    const nowSec = Date.now() / 1000;
    if (token.length > 16_384) return { ok: false, reason: "token too large" };
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.jwks, {
        issuer: this.endpoints.issuer,
        audience: this.opts.clientId,
        algorithms,
        clockTolerance: this.clockTolerance,
        requiredClaims: ["exp", "iat", "sub"],
      }));
    } catch (e) {
      return { ok: false, reason: joseReason(e) };
    }
    // jose checks iat only against a maxTokenAge, so a token issued in the future (a provider
    // clock far ahead, or one minted for later) would pass; refused with exp's leeway.
    if (payload.iat! > nowSec + this.clockTolerance) return { ok: false, reason: "claim iat is in the future" };
    const problem = claimProblem(payload, this.opts.clientId);
    if (problem) return { ok: false, reason: problem };
    const identity: Identity = {
      email: payload.email as string,
      groups: Array.isArray(payload.groups) ? payload.groups.filter((g): g is string => typeof g === "string") : undefined,
      scopes: scopesOf(payload),
      nonce: typeof payload.nonce === "string" ? payload.nonce : undefined,
      exp: payload.exp!,
      emailVerified: payload.email_verified === true || payload.email_verified === "true",
    };
    if (this.verified.size >= this.cacheSize) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, identity);
    return { ok: true, identity };
  }

  /**
   * The answer for a token verified before, without waiting: undefined when it must be verified.
   * The proxy's common case (a session in use) thus forwards in the same tick as it arrived.
   */
  cachedIdToken(token: string): VerifyResult | undefined {
    const known = this.verified.get(token);
    if (known === undefined) return undefined;
    if (known.exp + this.clockTolerance > Date.now() / 1000) return { ok: true, identity: known };
    this.verified.delete(token);
    return { ok: false, reason: "expired" };
  }

  /** The spec's token request (form body with the client secret), plus the PKCE verifier. */
  async exchangeCode(code: string, redirectUri: string, codeVerifier: string): Promise<ExchangeResult> {
    const body = new URLSearchParams({
      code,
      client_id: this.opts.clientId,
      client_secret: this.opts.clientSecret,
      redirect_uri: redirectUri,
      grant_type: "authorization_code",
      code_verifier: codeVerifier,
    });
    let res: Response;
    try {
      res = await fetch(this.endpoints.token, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body,
        redirect: "error",
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      const timeout = (e as Error).name === "TimeoutError";
      return { ok: false, status: timeout ? 504 : 502, reason: `token endpoint ${timeout ? `did not answer within ${this.timeoutMs / 1000} s` : `unreachable (${errorText(e)})`}` };
    }
    let json: Record<string, unknown> = {};
    try {
      const text = await res.text();
      json = text.length <= 1_000_000 ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      // not JSON: answered below by status
    }
    if (res.status >= 400 && res.status < 500) {
      const err = typeof json.error === "string" ? json.error.replace(/[^\x20-\x7e]/g, "").slice(0, 100) : `HTTP ${res.status}`;
      return { ok: false, status: 403, reason: `the provider refused the code (${err})` };
    }
    if (!res.ok) return { ok: false, status: 502, reason: `token endpoint answered HTTP ${res.status}` };
    if (typeof json.id_token !== "string") return { ok: false, status: 502, reason: "token endpoint answered without an id_token" };
    return { ok: true, idToken: json.id_token };
  }
}

function claimProblem(p: JWTPayload, clientId: string): string | undefined {
  if (typeof p.email !== "string" || p.email === "") return "no email claim";
  // It travels in a header (REMOTE-USER): printable ASCII only, no comma (a list separator).
  if (!/^[\x21-\x2b\x2d-\x7e]+$/.test(p.email)) return "email claim holds characters a header cannot carry";
  // Some providers send the flag as a string.
  if (p.email_verified === false || p.email_verified === "false") return "email not verified at the provider";
  // OpenID Connect Core 3.1.3.7: with several audiences, azp must name this client.
  if (Array.isArray(p.aud) && p.aud.length > 1 && p.azp !== clientId) return "azp is not this client";
  if (p.azp !== undefined && p.azp !== clientId) return "azp is not this client";
  return undefined;
}

/** Scopes granted: `scope` (space-separated, RFC 8693/9068) or `scp` (list or string). */
function scopesOf(p: JWTPayload): ReadonlySet<string> {
  const out = new Set<string>();
  for (const v of [p.scope, p.scp]) {
    if (typeof v === "string") for (const s of v.split(" ")) if (s) out.add(s);
    if (Array.isArray(v)) for (const s of v) if (typeof s === "string") out.add(s);
  }
  return out;
}

function joseReason(e: unknown): string {
  if (e instanceof joseErrors.JWTExpired) return "expired";
  if (e instanceof joseErrors.JWTClaimValidationFailed) return `claim ${e.claim} ${e.reason}`;
  if (e instanceof joseErrors.JOSEError) return e.code;
  return errorText(e);
}

function errorText(e: unknown): string {
  const err = e as { cause?: { code?: string }; code?: string; message?: string };
  return err.cause?.code ?? err.code ?? err.message ?? String(e);
}
