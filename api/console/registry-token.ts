// The console as the registry's authorization server (docs/registry.md, "Token authentication"):
// distribution's token protocol, the endpoint the registry's challenge sends clients to.
//
//   GET /api/v1/authorize/registry/?service=S&scope=repository:team/app:pull,push&account=A
//       Authorization: Basic base64(<user>:<console access token>)
//   200 {token, access_token, expires_in, issued_at}
//   401 {error, code, message, errors: [{code: "UNAUTHORIZED", message}]}   bad or missing credentials
//   400 the same shape                                                      a service that is not ours
//
// Who gets what (default deny; a requested action that is not allowed is dropped from the token,
// never an error, as distribution's token servers do):
//   admin                      every action on every repository, and registry:catalog:*
//   maintainer of app X        pull, push, delete (and *) on repositories X and X/...
//   viewer granted app X       pull on X and X/...
//   sync                       pull on every repository
//   anonymous (no credentials) pull on every repository, only with -registry-anonymous-pull;
//                              otherwise 401
//
// The signing key: one ES256 (P-256) key and a self-signed certificate for it, made by the first
// console that starts and kept in the store at /platform/console/registry-signing-key (created with
// a create-only compare, so consoles that start together race to one key and all use the stored
// one). Every token carries the key's libtrust key ID (what distribution 2.8 looks up) and the
// certificate in `x5c` (what every distribution version verifies against its rootcertbundle).
// Trade-off: whoever can read the store can mint registry tokens; they can already read the access
// token hashes and every app's grants, so the store is already the platform's root of trust.
//
// Each request builds its own claims object (the original console kept one module-level dict, so
// one request's `access` leaked into the next).
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject } from "node:crypto";
import { Hono, type Context } from "hono";
import { SignJWT } from "jose";
import { z } from "zod";
import type { Store } from "../../adapters/store/store.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { may, requestToken, type Gate, type Principal, type TokenVerifier } from "../auth/index.ts";
import type { AccessEntry } from "../registry/access.ts";
import { libtrustKeyId } from "../registry/token-auth.ts";
import { systemWallClock, type WallClock } from "./clock.ts";
import { authErrorHandler } from "./errors.ts";
import { isRepositoryName } from "../resources/registry-names.ts";
import { consolePrefix, CorruptRecordError, decodeRecord } from "./records.ts";
import { registryAuthConfigKey, type RegistryAuthConfig } from "../resources/registry-auth.ts";

export const registrySigningKeyKey = `${consolePrefix}registry-signing-key`;
export const registryTokenPath = "/api/v1/authorize/registry/";
export const defaultRegistryIssuer = "capstan-console";
export const defaultRegistryService = "capstan-registry";
/** Token lifetime: distribution's spec says at least 60 s. */
export const defaultRegistryTokenTtlSeconds = 300;
export const minRegistryTokenTtlSeconds = 60;

// ------------------------------------------------------------------------------------------------
// X.509 certificates, DER by hand: Node parses and verifies certificates but cannot build one, and
// the ~80 lines below spare the console an `openssl` binary at run time or an ASN.1 library with a
// dependency tree. Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
// (RFC 5280 4.1). The console needs only its self-signed P-256 certificate; the general form
// (RSA and Ed25519 issuers, chains) is what the tests build trust chains with.

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

const seq = (...c: Buffer[]) => der(0x30, ...c);
const oid = (hex: string) => Buffer.from(hex, "hex"); // a complete OBJECT IDENTIFIER TLV
const oidCommonName = oid("0603550403"); // 2.5.4.3
const oidBasicConstraints = oid("0603551d13"); // 2.5.29.19
const oidKeyUsage = oid("0603551d0f"); // 2.5.29.15
const oidSubjectKeyId = oid("0603551d0e"); // 2.5.29.14
const derTrue = Buffer.from("0101ff", "hex");
/** 9999-12-31T23:59:59Z, RFC 5280's "no well-defined expiration". */
export const noExpiration = new Date(Date.UTC(9999, 11, 31, 23, 59, 59));

/** The signature AlgorithmIdentifier and the signing call for an issuer key (P-256, RSA or Ed25519). */
function signatureAlgorithm(key: KeyObject): { id: Buffer; sign: (tbs: Buffer) => Buffer } {
  switch (key.asymmetricKeyType) {
    case "ec": // ecdsa-with-SHA256 1.2.840.10045.4.3.2; the signature is a DER ECDSA-Sig-Value
      return { id: seq(oid("06082a8648ce3d040302")), sign: (tbs) => sign("sha256", tbs, key) };
    case "rsa": // sha256WithRSAEncryption 1.2.840.113549.1.1.11, NULL parameters
      return { id: seq(oid("06092a864886f70d01010b"), Buffer.from("0500", "hex")), sign: (tbs) => sign("sha256", tbs, key) };
    case "ed25519": // id-Ed25519 1.3.101.112
      return { id: seq(oid("06032b6570")), sign: (tbs) => sign(null, tbs, key) };
    default:
      throw new Error(`cannot sign a certificate with a ${key.asymmetricKeyType} key`);
  }
}

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
function derTime(d: Date): Buffer {
  const digits = d.toISOString().slice(0, 19).replace(/[-T:]/g, ""); // YYYYMMDDHHMMSS
  const year = d.getUTCFullYear();
  return year >= 1950 && year < 2050 ? der(0x17, Buffer.from(`${digits.slice(2)}Z`)) : der(0x18, Buffer.from(`${digits}Z`));
}

function name(commonName: string): Buffer {
  return seq(der(0x31, seq(oidCommonName, der(0x0c, Buffer.from(commonName, "utf8")))));
}

function extension(id: Buffer, critical: boolean, value: Buffer): Buffer {
  return seq(id, ...(critical ? [derTrue] : []), der(0x04, value));
}

export interface CertificateRequest {
  /** The certified key. */
  publicKey: KeyObject;
  commonName: string;
  /** The signer: its key and name (the subject's own for a self-signed certificate). */
  issuer: { privateKey: KeyObject; commonName: string };
  notBefore: Date;
  /** Default: no expiration (9999-12-31). */
  notAfter?: Date;
  /** basicConstraints CA (may issue certificates). Default true. */
  ca?: boolean;
}

/**
 * An X.509 v3 certificate: basicConstraints (critical), keyUsage digitalSignature (+ keyCertSign
 * for a CA; critical) and a subjectKeyIdentifier.
 */
export function issueCertificate(req: CertificateRequest): X509Certificate {
  const ca = req.ca ?? true;
  const spki = req.publicKey.export({ type: "spki", format: "der" });
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40; // positive, 16 bytes, no leading zero
  const algorithm = signatureAlgorithm(req.issuer.privateKey);
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))), // version v3
    der(0x02, serial),
    algorithm.id,
    name(req.issuer.commonName),
    seq(derTime(req.notBefore), derTime(req.notAfter ?? noExpiration)),
    name(req.commonName),
    spki,
    der(
      0xa3,
      seq(
        extension(oidBasicConstraints, true, ca ? seq(derTrue) : seq()),
        // BIT STRING: digitalSignature is bit 0 (0x80), keyCertSign bit 5 (0x04); unused trailing bits.
        extension(oidKeyUsage, true, ca ? Buffer.from("03020284", "hex") : Buffer.from("03020780", "hex")),
        extension(oidSubjectKeyId, false, der(0x04, createHash("sha1").update(spki).digest())),
      ),
    ),
  );
  return new X509Certificate(seq(tbs, algorithm.id, der(0x03, Buffer.from([0]), algorithm.sign(tbs))));
}

/**
 * The signing key's certificate: self-signed, a CA (so it may also anchor a chain), valid from
 * `notBefore` with no expiration (distribution checks validity, and a signing certificate that
 * expired quietly would lock every client out of the registry; rotation is deliberate, see
 * docs/registry.md).
 */
export function selfSignedCertificate(privateKey: KeyObject, commonName: string, notBefore: Date): X509Certificate {
  return issueCertificate({ publicKey: createPublicKey(privateKey), commonName, issuer: { privateKey, commonName }, notBefore });
}

// ------------------------------------------------------------------------------------------------
// The signing key, shared by every console through the store.

const SigningKeyRecord = z.object({
  alg: z.literal("ES256"),
  /** PKCS#8 PEM. */
  privateKey: z.string(),
  /** The self-signed certificate of the key (PEM): the registry's rootcertbundle. */
  certificate: z.string(),
  kid: z.string(),
  createdAt: z.string(),
});

export interface RegistrySigningKey {
  privateKey: KeyObject;
  certificate: X509Certificate;
  /** PEM text of the certificate (what -registry-cert writes). */
  certificatePem: string;
  /** libtrust key ID of the public key (distribution 2.8's `kid`). */
  kid: string;
}

function decodeSigningKey(key: string, value: string): RegistrySigningKey {
  const record = decodeRecord(SigningKeyRecord, key, value);
  try {
    const privateKey = createPrivateKey(record.privateKey);
    const certificate = new X509Certificate(record.certificate);
    if (!certificate.checkPrivateKey(privateKey)) throw new Error("certificate and key differ");
    return { privateKey, certificate, certificatePem: certificate.toString(), kid: libtrustKeyId(certificate.publicKey) };
  } catch {
    throw new CorruptRecordError(key);
  }
}

export interface EnsureSigningKeyOptions {
  store: Store;
  clock?: WallClock;
}

/**
 * The registry signing key from the store, made (key, certificate, create-only put) when the store
 * holds none. Consoles starting together each make one; the first put wins and the others use it.
 */
export async function ensureRegistrySigningKey(opts: EnsureSigningKeyOptions): Promise<{ key: RegistrySigningKey; created: boolean }> {
  const { store } = opts;
  const clock = opts.clock ?? systemWallClock;
  const key = registrySigningKeyKey;
  for (let attempt = 0; attempt < 5; attempt++) {
    const kv = await store.get(key);
    if (kv !== null) return { key: decodeSigningKey(kv.key, kv.value), created: false };
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    // An hour back: registry hosts whose clocks lag a little still take the certificate as valid.
    const certificate = selfSignedCertificate(privateKey, "capstan registry token signer", new Date(clock.now() - 3_600_000));
    const record: z.infer<typeof SigningKeyRecord> = {
      alg: "ES256",
      privateKey: privateKey.export({ type: "pkcs8", format: "pem" }) as string,
      certificate: certificate.toString(),
      kid: libtrustKeyId(certificate.publicKey),
      createdAt: new Date(clock.now()).toISOString(),
    };
    const result = await store.put(key, JSON.stringify(record), { expect: [{ key, target: "createRevision", equals: 0 }] });
    if (result.succeeded) return { key: { privateKey, certificate, certificatePem: record.certificate, kid: record.kid }, created: true };
  }
  throw new Error(`${key} kept appearing and vanishing while the console tried to read it`);
}

/**
 * Publish {realm, issuer, service} at /platform/config/auth/registry for the registry; other fields
 * of a stored value are kept. Answers whether it wrote (nothing is written when the value is equal).
 */
export async function publishRegistryAuthConfig(store: Store, config: RegistryAuthConfig): Promise<boolean> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const kv = await store.get(registryAuthConfigKey);
    let current: Record<string, unknown> = {};
    if (kv !== null) {
      try {
        const parsed: unknown = JSON.parse(kv.value);
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) current = parsed as Record<string, unknown>;
      } catch {
        // not JSON: replaced by ours
      }
    }
    if (current.realm === config.realm && current.issuer === config.issuer && current.service === config.service) return false;
    const next = { ...current, realm: config.realm, issuer: config.issuer, service: config.service };
    const result = await store.put(registryAuthConfigKey, JSON.stringify(next), {
      expect: [{ key: registryAuthConfigKey, target: "modRevision", equals: kv?.modRevision ?? 0 }],
    });
    if (result.succeeded) return true;
  }
  throw new Error(`${registryAuthConfigKey} is changing too often to publish the registry's auth settings`);
}

// ------------------------------------------------------------------------------------------------
// Scopes: what a client asks for, and what a caller is granted.

const maxScopes = 100;

/**
 * `scope` parameters as entries: each parameter may hold several scopes separated by spaces;
 * a scope is `type:name:action[,action...]` (the name between the first and the last colon).
 * Unknown types, resource classes (`repository(plugin)`) and malformed scopes are ignored.
 */
export function parseScopes(params: readonly string[]): AccessEntry[] {
  const out: AccessEntry[] = [];
  for (const param of params) {
    for (const scope of param.split(/\s+/)) {
      if (scope === "" || out.length >= maxScopes) continue;
      const first = scope.indexOf(":");
      const last = scope.lastIndexOf(":");
      if (first <= 0 || first === last) continue;
      const type = scope.slice(0, first);
      const name = scope.slice(first + 1, last);
      const actions = [...new Set(scope.slice(last + 1).split(",").filter((a) => a !== ""))];
      if (type === "repository" && isRepositoryName(name)) out.push({ type, name, actions });
      else if (type === "registry" && name === "catalog") out.push({ type, name, actions });
    }
  }
  return out;
}

const everyRepositoryAction = ["pull", "push", "delete", "*"];

/** The actions a caller (undefined: anonymous) may take on one resource. */
function allowedActions(who: Principal | undefined, entry: AccessEntry): string[] {
  if (entry.type === "registry") return who?.role === "admin" ? ["*"] : [];
  if (who === undefined) return ["pull"];
  // Repositories `<app>` and `<app>/...` belong to app <app>.
  const app = entry.name.split("/")[0]!;
  if (may(who, "write", app)) return everyRepositoryAction;
  if (may(who, "read", app)) return ["pull"];
  return [];
}

/**
 * What a caller is granted of what it asked for: each entry cut to the allowed actions, entries
 * with none left dropped, one entry per resource.
 */
export function grantAccess(who: Principal | undefined, requested: readonly AccessEntry[]): AccessEntry[] {
  const byResource = new Map<string, AccessEntry>();
  for (const entry of requested) {
    const allowed = allowedActions(who, entry);
    const actions = entry.actions.filter((a) => allowed.includes(a));
    if (actions.length === 0) continue;
    const id = `${entry.type}:${entry.name}`;
    const merged = byResource.get(id);
    if (merged === undefined) byResource.set(id, { type: entry.type, name: entry.name, actions });
    else for (const a of actions) if (!merged.actions.includes(a)) merged.actions.push(a);
  }
  return [...byResource.values()];
}

// ------------------------------------------------------------------------------------------------
// The endpoint.

export interface RegistryTokenApiOptions {
  key: RegistrySigningKey;
  /** Checks the console access token given as the Basic password. */
  verifier: TokenVerifier;
  /** The process's gate: with `-auth none` every caller is the anonymous admin, as on every API. */
  gate?: Gate;
  issuer: string;
  service: string;
  /** -registry-anonymous-pull: callers without credentials get pull on every repository. */
  anonymousPull?: boolean;
  /** Token lifetime in seconds (default 300, at least 60). */
  ttlSeconds?: number;
  clock?: WallClock;
  log?: Logger;
}

class CredentialError extends Error {
  constructor(
    readonly status: 400 | 401,
    message: string,
  ) {
    super(message);
  }
}

/** Basic credentials: [user, password], or undefined when the header is not Basic. */
function basicCredentials(header: string | undefined): [string, string] | undefined {
  const m = /^basic\s+(\S+)\s*$/i.exec(header?.trim() ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) throw new CredentialError(401, "malformed Basic credentials: expected base64(<user>:<access token>)");
  return [decoded.slice(0, colon), decoded.slice(colon + 1)];
}

/** The routes of the token endpoint, for the console's app (api.ts mounts it). */
export function registryTokenApi(opts: RegistryTokenApiOptions): Hono {
  const clock = opts.clock ?? systemWallClock;
  const log = (opts.log ?? silentLogger).child({ api: "registry-token" });
  const ttl = Math.max(minRegistryTokenTtlSeconds, Math.floor(opts.ttlSeconds ?? defaultRegistryTokenTtlSeconds));
  const x5c = [opts.key.certificate.raw.toString("base64")];
  const app = new Hono();
  app.onError(authErrorHandler(log));

  const failure = (c: Context, status: 400 | 401, message: string) => {
    const code = status === 401 ? "Unauthorized" : "BadRequest";
    // `errors` is distribution's shape: docker prints "unauthorized: <message>" from it.
    const body = { error: message, code, message, errors: [{ code: status === 401 ? "UNAUTHORIZED" : "DENIED", message }] };
    return c.json(body, status, status === 401 ? { "www-authenticate": `Basic realm="${opts.service}"` } : {});
  };

  /** The caller: a Principal, or undefined for an anonymous one that may pull. */
  const caller = async (c: Context): Promise<Principal | undefined> => {
    if (opts.gate?.mode === "none") return opts.gate.authenticate(c);
    const header = c.req.header("authorization");
    const basic = basicCredentials(header);
    const token = basic !== undefined ? basic[1].trim() : requestToken((n) => c.req.header(n));
    if (token === undefined || token === "") {
      if (opts.anonymousPull) return undefined;
      throw new CredentialError(401, "credentials required: log in with your e-mail as the user name and a console access token as the password");
    }
    let who: Principal;
    try {
      who = await opts.verifier.verify(token);
    } catch {
      throw new CredentialError(401, "invalid user name or access token: the password must be a valid console access token");
    }
    // The user name must be the token's user (e-mails compare case-insensitively): a token used
    // under another name would put the wrong name in the registry's logs.
    if (basic !== undefined && basic[0].trim().toLowerCase() !== who.user.toLowerCase()) {
      throw new CredentialError(401, "invalid user name or access token: the user name must be the access token's user (capstan whoami shows it)");
    }
    return who;
  };

  const issue = async (c: Context) => {
    let who: Principal | undefined;
    try {
      who = await caller(c);
    } catch (e) {
      if (!(e instanceof CredentialError)) throw e;
      log.info({ status: e.status, reason: e.message }, "registry token refused");
      return failure(c, e.status, e.message);
    }
    const service = c.req.query("service");
    if (service !== undefined && service !== "" && service !== opts.service) {
      return failure(c, 400, `unknown service ${JSON.stringify(service.slice(0, 100))}: this console issues tokens for ${JSON.stringify(opts.service)}`);
    }
    const access = grantAccess(who, parseScopes(c.req.queries("scope") ?? []));
    const nowMs = clock.now();
    const iat = Math.floor(nowMs / 1000);
    // A fresh claims object per request.
    const claims = { access };
    let jwt = new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: opts.key.kid, x5c })
      .setIssuer(opts.issuer)
      // distribution 2.8 accepts only a string `aud`.
      .setAudience(opts.service)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + ttl)
      .setJti(randomBytes(16).toString("base64url"));
    if (who !== undefined) jwt = jwt.setSubject(who.user);
    const token = await jwt.sign(opts.key.privateKey);
    log.debug({ subject: who?.user ?? "(anonymous)", tokenId: who?.tokenId, access: access.map((a) => `${a.type}:${a.name}:${a.actions.join(",")}`) }, "registry token issued");
    return c.json({ token, access_token: token, expires_in: ttl, issued_at: new Date(iat * 1000).toISOString() });
  };

  app.get(registryTokenPath, issue);
  app.get(registryTokenPath.replace(/\/$/, ""), issue);
  return app;
}
