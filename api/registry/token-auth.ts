// The registry's side of distribution's token authentication (docs/registry.md, "Token
// authentication"): a request carries `Authorization: Bearer <JWT>` minted by the authorization
// server (the console, api/console/registry-token.ts); this file checks it and answers the
// challenges distribution answers.
//
// A token is accepted when, and only when:
// - its header's `alg` is ES256, RS256 or EdDSA (never `none`, never an HMAC: a verifier that let
//   the token choose HS256 could be fooled by a token MACed with the public certificate as secret);
// - its signing key is trusted, found as distribution finds it (2.8 and v3): an `x5c` chain whose
//   leaf, or a certificate above it, is in the root certificate bundle (each link's signature and
//   validity checked), else a `jwk` header whose key is one of the bundle's, else a `kid` naming a
//   bundle key in libtrust form (distribution 2.8) or as an RFC 7638 thumbprint (distribution v3);
//   an x5c or jwk header that does not verify is refused, with no fallback to `kid`;
// - the signature verifies (jose), `iss` equals the issuer, `aud` is or contains the service, `exp`
//   is present and `exp`/`nbf` hold with distribution's 60 s leeway;
// - its `access` claim covers every action the request needs (`*` covers any action).
//
// Settings are read on every request, so the console's {realm, issuer, service} and the bundle may
// change while the registry runs; undefined means token auth is off and everything is allowed.
import { createHash, createPublicKey, X509Certificate, type JsonWebKey, type KeyObject } from "node:crypto";
import { calculateJwkThumbprint, decodeProtectedHeader, jwtVerify, type JWK, type JWTPayload, type ProtectedHeaderParameters } from "jose";
import { scopeOf, type AccessEntry, type AuthDecision, type RegistryAuthorizer } from "./access.ts";

export interface TokenAuthSettings {
  /** Where clients get tokens (the console's `/api/v1/authorize/registry/`). */
  realm: string;
  /** The `iss` every token must carry. */
  issuer: string;
  /** This registry's name: every token's `aud` must be or contain it. */
  service: string;
  /** PEM text of the certificates whose keys may sign tokens (distribution's `rootcertbundle`). */
  rootCertBundle: string;
}

export interface TokenAuthOptions {
  /** Milliseconds since the epoch (default Date.now); tests move it. */
  now?: () => number;
}

/** distribution's leeway on `exp` and `nbf` (token.go). */
export const tokenLeewaySeconds = 60;
/** Signature algorithms a token may use. */
export const tokenAlgorithms = ["ES256", "RS256", "EdDSA"] as const;
const maxChainLength = 10;
const maxTokenLength = 64 * 1024;

/**
 * libtrust's key ID (docker/libtrust util.go keyIDFromCryptoKey), the `kid` distribution 2.8 looks
 * up: base32 (RFC 4648 alphabet, no padding) of the first 240 bits of SHA-256 over the DER
 * SubjectPublicKeyInfo, in 12 groups of 4 joined by ":".
 */
export function libtrustKeyId(publicKey: KeyObject): string {
  const digest = createHash("sha256")
    .update(publicKey.export({ type: "spki", format: "der" }))
    .digest()
    .subarray(0, 30);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of digest) {
    value = ((value << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  // 240 bits are exactly 48 characters: no partial group, no padding.
  return out.match(/.{4}/g)!.join(":");
}

/** The RFC 7638 SHA-256 thumbprint of a public key (base64url), the `kid` distribution v3 looks up. */
export async function jwkThumbprintKeyId(publicKey: KeyObject): Promise<string> {
  return calculateJwkThumbprint(publicKey.export({ format: "jwk" }) as JWK, "sha256");
}

/**
 * The challenge distribution answers (accesscontroller.go): `Bearer realm="...",service="..."`,
 * `,scope="..."` when the request needs access (one `type:name:actions` per resource, joined by
 * spaces), and `,error="..."` when a token was sent but is bad or too narrow.
 */
export function bearerChallenge(settings: Pick<TokenAuthSettings, "realm" | "service">, needed: readonly AccessEntry[], error?: "invalid_token" | "insufficient_scope"): string {
  let challenge = `Bearer realm=${quote(settings.realm)},service=${quote(settings.service)}`;
  const scope = mergeAccess(needed).map(scopeOf).join(" ");
  if (scope !== "") challenge += `,scope=${quote(scope)}`;
  if (error !== undefined) challenge += `,error=${quote(error)}`;
  return challenge;
}

/** Go's %q for the characters a header may hold: backslash and double quote escaped. */
function quote(s: string): string {
  return `"${s.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`;
}

/** One entry per (type, name), actions in first-seen order without repeats (distribution's accessSet). */
function mergeAccess(entries: readonly AccessEntry[]): AccessEntry[] {
  const byResource = new Map<string, AccessEntry>();
  for (const e of entries) {
    const id = `${e.type}\u0000${e.name}`;
    let merged = byResource.get(id);
    if (merged === undefined) byResource.set(id, (merged = { type: e.type, name: e.name, actions: [] }));
    for (const action of e.actions) if (!merged.actions.includes(action)) merged.actions.push(action);
  }
  return [...byResource.values()].filter((e) => e.actions.length > 0);
}

/** The trusted keys of one root certificate bundle. */
interface Bundle {
  certificates: X509Certificate[];
  /** DER (base64) of each certificate, to find an x5c link that is itself in the bundle. */
  raw: Set<string>;
  /** libtrust key IDs and RFC 7638 thumbprints -> key. */
  keys: Map<string, KeyObject>;
}

/** Parse a PEM bundle; certificates that do not parse are skipped (a bundle of none trusts nothing). */
export async function parseCertBundle(pem: string): Promise<Bundle> {
  const bundle: Bundle = { certificates: [], raw: new Set(), keys: new Map() };
  for (const block of pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []) {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(block);
    } catch {
      continue;
    }
    bundle.certificates.push(cert);
    bundle.raw.add(cert.raw.toString("base64"));
    bundle.keys.set(libtrustKeyId(cert.publicKey), cert.publicKey);
    try {
      bundle.keys.set(await jwkThumbprintKeyId(cert.publicKey), cert.publicKey);
    } catch {
      // a key type JWK cannot express: reachable by libtrust kid and x5c only
    }
  }
  return bundle;
}

class Refused extends Error {}

function validAt(cert: X509Certificate, nowMs: number): boolean {
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  return !Number.isNaN(from) && !Number.isNaN(to) && from <= nowMs && nowMs <= to;
}

/** True when `issuer` signed `cert` and may sign certificates. */
function issued(cert: X509Certificate, issuer: X509Certificate): boolean {
  return issuer.ca && cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

/**
 * The leaf key of an `x5c` chain that reaches the bundle: walking up from the leaf, a link that is
 * itself a bundle certificate, or that a bundle certificate issued, ends the walk; every link below
 * must have been issued by the next one. Every certificate used must be valid now.
 */
function keyFromChain(x5c: unknown, bundle: Bundle, nowMs: number): KeyObject {
  if (!Array.isArray(x5c) || x5c.length === 0 || x5c.length > maxChainLength) throw new Refused("x5c must be a non-empty array of at most 10 certificates");
  const chain = x5c.map((entry) => {
    if (typeof entry !== "string" || !/^[A-Za-z0-9+/]+={0,2}$/.test(entry)) throw new Refused("x5c entries must be base64 DER certificates");
    try {
      return new X509Certificate(Buffer.from(entry, "base64"));
    } catch {
      throw new Refused("x5c holds a certificate that does not parse");
    }
  });
  for (let i = 0; i < chain.length; i++) {
    const cert = chain[i]!;
    if (!validAt(cert, nowMs)) throw new Refused("a certificate of the x5c chain is not valid now");
    if (bundle.raw.has(cert.raw.toString("base64"))) return chain[0]!.publicKey;
    const anchor = bundle.certificates.find((root) => issued(cert, root));
    if (anchor !== undefined) {
      if (!validAt(anchor, nowMs)) throw new Refused("the bundle certificate that issued the x5c chain is not valid now");
      return chain[0]!.publicKey;
    }
    const next = chain[i + 1];
    if (next === undefined || !issued(cert, next)) throw new Refused("the x5c chain does not lead to a trusted certificate");
  }
  throw new Refused("the x5c chain does not lead to a trusted certificate");
}

async function signingKey(header: ProtectedHeaderParameters, bundle: Bundle, nowMs: number): Promise<KeyObject> {
  if (header.x5c !== undefined) return keyFromChain(header.x5c, bundle, nowMs);
  if (header.jwk !== undefined) {
    // Trusted only when it is one of the bundle's keys; the bundle's copy is used.
    let key: KeyObject;
    try {
      const { d: _d, ...pub } = header.jwk as JsonWebKey;
      key = createPublicKey({ key: pub, format: "jwk" });
    } catch {
      throw new Refused("the jwk header is not a public key");
    }
    const trusted = bundle.keys.get(libtrustKeyId(key));
    if (trusted === undefined) throw new Refused("the jwk header names an untrusted key");
    return trusted;
  }
  if (typeof header.kid === "string" && header.kid !== "") {
    const trusted = bundle.keys.get(header.kid);
    if (trusted === undefined) throw new Refused("the token is signed by an untrusted key");
    return trusted;
  }
  throw new Refused("the token names no signing key (kid, jwk or x5c)");
}

/** The token's `access` claim as entries; anything malformed grants nothing. */
function grantedAccess(payload: JWTPayload): AccessEntry[] {
  const access = payload.access;
  if (!Array.isArray(access)) return [];
  const out: AccessEntry[] = [];
  for (const raw of access as unknown[]) {
    if (typeof raw !== "object" || raw === null) continue;
    const { type, name, actions } = raw as Record<string, unknown>;
    if ((type !== "repository" && type !== "registry") || typeof name !== "string" || !Array.isArray(actions)) continue;
    out.push({ type, name, actions: actions.filter((a): a is string => typeof a === "string") });
  }
  return out;
}

/** True when the granted entries cover every needed action (`*` covers any action). */
export function covers(granted: readonly AccessEntry[], needed: readonly AccessEntry[]): boolean {
  return needed.every((n) =>
    n.actions.every((action) => granted.some((g) => g.type === n.type && g.name === n.name && (g.actions.includes(action) || g.actions.includes("*")))),
  );
}

/**
 * The RegistryAuthorizer of distribution's token auth. `settings` is called on every request:
 * undefined turns token auth off (everything allowed).
 */
export function tokenAuthorizer(settings: () => TokenAuthSettings | undefined, opts: TokenAuthOptions = {}): RegistryAuthorizer {
  const now = opts.now ?? Date.now;
  // The parsed bundle of the last PEM text seen: parsed again only when the text changes.
  let cached: { pem: string; bundle: Promise<Bundle> } | undefined;
  const bundleOf = (pem: string): Promise<Bundle> => {
    if (cached === undefined || cached.pem !== pem) cached = { pem, bundle: parseCertBundle(pem) };
    return cached.bundle;
  };

  return {
    async authorize(authorization: string | undefined, needed: AccessEntry[]): Promise<AuthDecision> {
      const s = settings();
      if (s === undefined) return { ok: true };
      const refuse = (error?: "invalid_token" | "insufficient_scope"): AuthDecision => ({
        ok: false,
        challenge: bearerChallenge(s, needed, error),
        ...(error !== undefined ? { error } : {}),
      });
      // distribution: anything but exactly "Bearer <token>" is "token required" (no error param).
      const parts = (authorization ?? "").split(" ");
      if (parts.length !== 2 || parts[0]!.toLowerCase() !== "bearer" || parts[1] === "") return refuse();
      const jwt = parts[1]!;
      if (jwt.length > maxTokenLength) return refuse("invalid_token");

      const nowMs = now();
      let payload: JWTPayload;
      try {
        const header = decodeProtectedHeader(jwt);
        if (typeof header.alg !== "string" || !(tokenAlgorithms as readonly string[]).includes(header.alg)) return refuse("invalid_token");
        const bundle = await bundleOf(s.rootCertBundle);
        const key = await signingKey(header, bundle, nowMs);
        ({ payload } = await jwtVerify(jwt, key, {
          algorithms: [...tokenAlgorithms],
          issuer: s.issuer,
          audience: s.service,
          clockTolerance: tokenLeewaySeconds,
          currentDate: new Date(nowMs),
          requiredClaims: ["exp"],
        }));
      } catch {
        // Fail closed: a malformed token, an untrusted key, a bad signature or claim, or anything
        // the libraries throw about the key or the input is an invalid token.
        return refuse("invalid_token");
      }
      if (!covers(grantedAccess(payload), needed)) return refuse("insufficient_scope");
      return { ok: true, ...(typeof payload.sub === "string" && payload.sub !== "" ? { subject: payload.sub } : {}) };
    },
  };
}
