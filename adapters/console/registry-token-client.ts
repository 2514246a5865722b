// A client of the console's registry token endpoint (api/console/registry-token.ts) for a service
// that pulls on the platform's behalf: the orchestrator asks it for a registry token that may pull
// one repository and nothing else, with its console access token as the Basic password, and hands
// the engines only that token (docs/registry.md, "How the platform pulls").
//
//   GET <realm>?service=<service>&scope=repository:<name>:pull
//       Authorization: Basic base64(<the access token's user>:<access token>)
//   200 {token, access_token, expires_in, issued_at}
//
// Where the access token may go: to the realm the console published in the store
// (/platform/config/auth/registry, read by the caller), never to one a registry's 401 names; over
// HTTPS, or plain HTTP to a loopback address only (127.0.0.0/8, ::1, localhost); no redirect is
// followed (it would carry the Authorization header elsewhere). Every call has a timeout.
//
// The answer is checked before anyone gets it: a JWT whose `access` claim grants pull on the
// repository asked for and nothing else (the console never grants more than asked; a token that
// did would be refused here rather than handed to an engine).
//
// An HTTP client of an outside service, so it lives in adapters/ (docs/development.md, "Conventions"):
// the controllers' image pulls use it (controllers/shared/registry-credentials.ts). The published
// realm is read with api/resources/registry-auth.ts.
import { decodeJwt } from "jose";
import { fetch, type Dispatcher } from "undici";
import { isLoopbackHost } from "../../runtime/loopback.ts";

/** One entry of a registry token's `access` claim. */
export interface GrantedAccess {
  type: string;
  name: string;
  actions: string[];
}

/** The claims of a registry token that matter to its holder (read, not verified: the registry verifies). */
export interface RegistryTokenClaims {
  sub?: string;
  iss?: string;
  aud?: string | string[];
  exp?: number;
  access: GrantedAccess[];
}

export interface PullToken {
  /** The JWT: what the engine gets (its `registrytoken`). */
  token: string;
  /** When it expires, by the local clock (ms): request start + expires_in. */
  expiresAt: number;
  /** Its lifetime as the endpoint told it (expires_in), ms. */
  lifetimeMs: number;
  claims: RegistryTokenClaims;
}

export interface PullTokenRequest {
  /** The token endpoint (the published realm). */
  realm: string;
  service: string;
  /** The repository, e.g. "shop/web". */
  repository: string;
  /** The Basic user: the access token's user (the endpoint checks it is). */
  user: string;
  /** The console access token. Sent to `realm` only, and only when credentialsMayGoTo(realm). */
  accessToken: string;
  /** Of the whole call, answer included (default 10 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** For an HTTPS realm with a CA of its own. */
  dispatcher?: Dispatcher;
  /** Local clock (ms), default Date.now. */
  now?: () => number;
}

/** The scope of a pull of one repository. */
export function pullScope(repository: string): string {
  return `repository:${repository}:pull`;
}

/** Whether an access token may be sent to `url`: HTTPS, or plain HTTP to a loopback address. */
export function credentialsMayGoTo(url: URL): boolean {
  return url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname));
}

/** The claims of a JWT, without verifying it; throws when it is not one or has no `access` array. */
export function decodeRegistryTokenClaims(jwt: string): RegistryTokenClaims {
  const payload = decodeJwt(jwt);
  const access = payload.access;
  if (!Array.isArray(access)) throw new Error("the token has no access claim");
  const entries: GrantedAccess[] = access.map((a: unknown) => {
    const e = (typeof a === "object" && a !== null ? a : {}) as Record<string, unknown>;
    return {
      type: String(e.type ?? ""),
      name: String(e.name ?? ""),
      actions: Array.isArray(e.actions) ? e.actions.map(String) : [],
    };
  });
  return {
    ...(typeof payload.sub === "string" && { sub: payload.sub }),
    ...(typeof payload.iss === "string" && { iss: payload.iss }),
    ...(payload.aud !== undefined && { aud: payload.aud }),
    ...(typeof payload.exp === "number" && { exp: payload.exp }),
    access: entries,
  };
}

/**
 * Whether `claims` grant pull on `repository` and nothing else: "" when they do, else what is
 * wrong with them.
 */
export function pullOnlyProblem(claims: RegistryTokenClaims, repository: string): string {
  const other = claims.access.filter((a) => a.type !== "repository" || a.name !== repository || a.actions.some((x) => x !== "pull"));
  if (other.length > 0) return `it grants more than pull on ${repository} (${other.map((a) => `${a.type}:${a.name}:${a.actions.join(",")}`).join(" ")})`;
  if (!claims.access.some((a) => a.actions.includes("pull"))) return `it grants no pull on ${repository}`;
  return "";
}

/** Asks the token endpoint for a token that pulls `repository`; rejects with a message naming the realm (never the access token). */
export async function requestPullToken(r: PullTokenRequest): Promise<PullToken> {
  const now = r.now ?? Date.now;
  const timeoutMs = r.timeoutMs ?? 10_000;
  let url: URL;
  try {
    url = new URL(r.realm);
  } catch {
    throw new Error(`the registry token realm ${JSON.stringify(r.realm)} is not a URL`);
  }
  const where = `${url.origin}${url.pathname}`;
  if (!credentialsMayGoTo(url)) {
    throw new Error(
      `the registry token realm ${where} is not HTTPS (nor plain HTTP to a loopback address): the console access token is not sent there; ` +
        "serve the console over HTTPS (-tls-cert, -tls-key)",
    );
  }
  url.searchParams.set("service", r.service);
  url.searchParams.set("scope", pullScope(r.repository));
  const basic = Buffer.from(`${r.user}:${r.accessToken}`, "utf8").toString("base64");
  const signal = r.signal ? AbortSignal.any([r.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
  const started = now();
  let status: number;
  let text: string;
  try {
    const res = await fetch(url, {
      headers: { authorization: `Basic ${basic}`, accept: "application/json" },
      signal,
      redirect: "error",
      ...(r.dispatcher && { dispatcher: r.dispatcher }),
    });
    status = res.status;
    text = await res.text();
  } catch (e) {
    if (r.signal?.aborted) throw r.signal.reason;
    const reason = signal.aborted ? `no answer within ${timeoutMs} ms` : describeFetchError(e);
    throw new Error(`cannot reach the registry token endpoint ${where}: ${reason}`, { cause: e });
  }
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: named below
  }
  if (status !== 200) {
    const message = typeof body.message === "string" ? body.message : typeof body.error === "string" ? body.error : text.trim().slice(0, 200);
    const who = status === 401 ? `refused the console access token of ${r.user}` : `answered ${status}`;
    throw new Error(`the registry token endpoint ${where} ${who}${message ? `: ${message}` : ""}`);
  }
  const token = typeof body.token === "string" && body.token !== "" ? body.token : typeof body.access_token === "string" ? body.access_token : "";
  if (token === "") throw new Error(`the registry token endpoint ${where} answered 200 without a token`);
  let claims: RegistryTokenClaims;
  try {
    claims = decodeRegistryTokenClaims(token);
  } catch (e) {
    throw new Error(`the registry token endpoint ${where} answered a token that is not a registry JWT (${(e as Error).message})`, { cause: e });
  }
  const problem = pullOnlyProblem(claims, r.repository);
  if (problem !== "") throw new Error(`the registry token endpoint ${where} answered a token for ${r.user} that is not used: ${problem}`);
  // distribution's token spec: 60 s when the answer does not say.
  const expiresIn = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : 60;
  return { token, expiresAt: started + expiresIn * 1000, lifetimeMs: expiresIn * 1000, claims };
}

function describeFetchError(e: unknown): string {
  const cause = (e as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause && typeof cause.code === "string") return `${cause.code}${typeof cause.message === "string" ? ` (${cause.message})` : ""}`;
  return e instanceof Error ? e.message : String(e);
}
