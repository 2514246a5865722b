// The registry's token verifier (api/registry/token-auth.ts) against tokens made here with jose and
// node:crypto: good ones (libtrust kid, RFC 7638 kid, x5c chains, jwk header, RS256, EdDSA) are
// accepted; forged, expired, misaddressed and too-narrow ones are refused with distribution's
// challenges. The libtrust key ID is checked against the published value for a known key.
import { createHash, createHmac, createPublicKey, generateKeyPairSync, sign as cryptoSign, type KeyObject, type X509Certificate } from "node:crypto";
import { calculateJwkThumbprint, SignJWT, type JWK, type JWTPayload } from "jose";
import { describe, expect, it } from "vitest";
import { issueCertificate, selfSignedCertificate } from "../../../api/console/registry-token.ts";
import type { AccessEntry } from "../../../api/registry/access.ts";
import { bearerChallenge, jwkThumbprintKeyId, libtrustKeyId, tokenAuthorizer, type TokenAuthSettings } from "../../../api/registry/token-auth.ts";

const realm = "https://console.example/api/v1/authorize/registry/";
const issuer = "capstan-console";
const service = "registry.local";
const hourAgo = () => new Date(Date.now() - 3_600_000);

function ec() {
  return generateKeyPairSync("ec", { namedCurve: "P-256" });
}
const pem = (...certs: X509Certificate[]) => certs.map((c) => c.toString()).join("\n");
const der64 = (c: X509Certificate) => c.raw.toString("base64");

// The trusted world: a self-signed ES256 signer, an RSA and an Ed25519 one, and a CA (root) with an
// intermediate under it; the bundle holds the three signers' certificates and the root.
const signer = ec();
const signerCert = selfSignedCertificate(signer.privateKey, "signer", hourAgo());
const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
const rsaCert = selfSignedCertificate(rsa.privateKey, "rsa signer", hourAgo());
const ed = generateKeyPairSync("ed25519");
const edCert = selfSignedCertificate(ed.privateKey, "ed signer", hourAgo());
const root = ec();
const rootCert = selfSignedCertificate(root.privateKey, "root", hourAgo());
const intermediate = ec();
const intermediateCert = issueCertificate({ publicKey: intermediate.publicKey, commonName: "intermediate", issuer: { privateKey: root.privateKey, commonName: "root" }, notBefore: hourAgo() });
const leaf = ec();
const leafCert = issueCertificate({ publicKey: leaf.publicKey, commonName: "leaf", issuer: { privateKey: intermediate.privateKey, commonName: "intermediate" }, notBefore: hourAgo(), ca: false });
const directLeaf = ec();
const directLeafCert = issueCertificate({ publicKey: directLeaf.publicKey, commonName: "direct leaf", issuer: { privateKey: root.privateKey, commonName: "root" }, notBefore: hourAgo(), ca: false });

// The untrusted world.
const stranger = ec();
const strangerCert = selfSignedCertificate(stranger.privateKey, "signer", hourAgo());
const strangerLeaf = ec();
const strangerLeafCert = issueCertificate({ publicKey: strangerLeaf.publicKey, commonName: "leaf", issuer: { privateKey: stranger.privateKey, commonName: "signer" }, notBefore: hourAgo(), ca: false });
// Issued by the trusted signer, but from a non-CA certificate: the leaf's issuer may not sign certificates.
const nonCaIssued = ec();
const nonCaIssuedCert = issueCertificate({ publicKey: nonCaIssued.publicKey, commonName: "under a leaf", issuer: { privateKey: directLeaf.privateKey, commonName: "direct leaf" }, notBefore: hourAgo(), ca: false });
const expiredLeaf = ec();
const expiredLeafCert = issueCertificate({
  publicKey: expiredLeaf.publicKey,
  commonName: "expired",
  issuer: { privateKey: root.privateKey, commonName: "root" },
  notBefore: new Date(Date.now() - 7_200_000),
  notAfter: hourAgo(),
  ca: false,
});

const settings: TokenAuthSettings = { realm, issuer, service, rootCertBundle: pem(signerCert, rsaCert, edCert, rootCert) };
const authorizer = tokenAuthorizer(() => settings);

const pullFooBar: AccessEntry[] = [{ type: "repository", name: "foo/bar", actions: ["pull"] }];
const pushFooBar: AccessEntry[] = [{ type: "repository", name: "foo/bar", actions: ["pull", "push"] }];

interface Mint {
  key?: KeyObject;
  alg?: string;
  header?: Record<string, unknown>;
  claims?: JWTPayload;
  /** Leave these claims out. */
  omit?: string[];
}

const now = () => Math.floor(Date.now() / 1000);

function claims(extra: JWTPayload = {}, omit: string[] = []): JWTPayload {
  const c: JWTPayload = { iss: issuer, sub: "alice@example.com", aud: service, iat: now(), nbf: now(), exp: now() + 300, jti: "j1", access: pullFooBar, ...extra };
  for (const k of omit) delete c[k];
  return c;
}

async function mint(m: Mint = {}): Promise<string> {
  const header = m.header ?? { kid: libtrustKeyId(signer.publicKey) };
  return new SignJWT(claims(m.claims, m.omit)).setProtectedHeader({ alg: m.alg ?? "ES256", typ: "JWT", ...header }).sign(m.key ?? signer.privateKey);
}

const b64url = (x: string | Buffer) => Buffer.from(x).toString("base64url");

/** A JWS made by hand (alg none, HMAC): jose refuses to make these. */
function handMade(header: Record<string, unknown>, payload: JWTPayload, signature: (input: string) => string): string {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  return `${input}.${signature(input)}`;
}

const bearer = (t: string) => `Bearer ${t}`;

describe("libtrust key ID", () => {
  it("equals the published kid of the original console's certificate (distribution 2.8's derivation)", () => {
    // The public key of laincloud/console authorize/conf/server.pem
    // whose kid the original hard-coded, as distribution computed it (docs/registry.md, "The token").
    const publicKey = createPublicKey(
      [
        "-----BEGIN PUBLIC KEY-----",
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA2n86T/8T/0GGuFVaUCba",
        "IH5qS/ToMDIEYNzjdAUpJbsbNLAN21P6O1Bs85dnDa9rkrBgaw610LVw41gAyD0H",
        "VDPmHe6kWMpRh7Cjmow6OxlaAT6E72AZJXk88YeXcEmVHkj7KKHRQcgVaih6QB6Y",
        "uhGXUpuPyqDmatMvlr5Ea/xv2TIbeqwC1ZHbnacEHTZh8YjZZ1C1sm4MDqpX+mx4",
        "UjO6yYxi9sVQwIjKq1IwwDanQnzx1KpgrVdZ+CoUgGn9QkhVFGpc7hZtkE1Sjdk3",
        "U/Mw6Kzzgp/9BrfzJkpOJ/J7VQiBaVyCGDrLrOv9r6A+62SMZ7r+67yJnvBwDNiN",
        "owIDAQAB",
        "-----END PUBLIC KEY-----",
      ].join("\n"),
    );
    expect(libtrustKeyId(publicKey)).toBe("A4TG:6YYF:IFNY:HJ4R:SKIJ:XPSE:E4X2:RZQD:26I6:EM5U:57R2:ESAY");
  });

  it("equals libtrust's algorithm (docs/registry.md, \"The token\") for EC, RSA and Ed25519 keys", () => {
    // libtrust's code, verbatim in substance: base32 of SHA-256(SPKI DER)[0:30] in groups of 4.
    const reference = (pub: KeyObject) => {
      const d = createHash("sha256").update(pub.export({ type: "spki", format: "der" })).digest().subarray(0, 30);
      const A = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
      let bits = 0;
      let v = 0;
      let s = "";
      for (const b of d) {
        v = (v << 8) | b;
        bits += 8;
        while (bits >= 5) {
          s += A[(v >>> (bits - 5)) & 31];
          bits -= 5;
        }
      }
      return s.match(/.{4}/g)!.join(":");
    };
    for (const pub of [signer.publicKey, rsa.publicKey, ed.publicKey, root.publicKey]) {
      const kid = libtrustKeyId(pub);
      expect(kid).toBe(reference(pub));
      expect(kid).toMatch(/^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/);
    }
  });

  it("the RFC 7638 kid is jose's thumbprint", async () => {
    expect(await jwkThumbprintKeyId(signer.publicKey)).toBe(await calculateJwkThumbprint(signer.publicKey.export({ format: "jwk" }) as JWK));
  });
});

describe("tokenAuthorizer accepts", () => {
  const good: [string, () => Promise<string>, AccessEntry[]?][] = [
    ["ES256 with the libtrust kid (distribution 2.8)", () => mint()],
    ["ES256 with the RFC 7638 kid (distribution v3)", async () => mint({ header: { kid: await jwkThumbprintKeyId(signer.publicKey) } })],
    ["x5c: the signer's self-signed certificate from the bundle", () => mint({ header: { x5c: [der64(signerCert)] } })],
    ["x5c: leaf + intermediate, root in the bundle", () => mint({ key: leaf.privateKey, header: { x5c: [der64(leafCert), der64(intermediateCert)] } })],
    ["x5c: leaf + intermediate + root", () => mint({ key: leaf.privateKey, header: { x5c: [der64(leafCert), der64(intermediateCert), der64(rootCert)] } })],
    ["x5c: a leaf the bundle's root issued, alone", () => mint({ key: directLeaf.privateKey, header: { x5c: [der64(directLeafCert)] } })],
    ["a jwk header holding a bundle key", () => mint({ header: { jwk: signer.publicKey.export({ format: "jwk" }) } })],
    ["RS256 with the libtrust kid", () => mint({ alg: "RS256", key: rsa.privateKey, header: { kid: libtrustKeyId(rsa.publicKey) } })],
    ["EdDSA (Ed25519) with the RFC 7638 kid", async () => mint({ alg: "EdDSA", key: ed.privateKey, header: { kid: await jwkThumbprintKeyId(ed.publicKey) } })],
    ["aud as an array holding the service", () => mint({ claims: { aud: ["other", service] } })],
    ["exp 50 s ago (within the 60 s leeway)", () => mint({ claims: { exp: now() - 50 } })],
    ["nbf 50 s ahead (within the 60 s leeway)", () => mint({ claims: { nbf: now() + 50 } })],
    ["no nbf", () => mint({ omit: ["nbf"] })],
    ["`*` covers push", () => mint({ claims: { access: [{ type: "repository", name: "foo/bar", actions: ["*"] }] } }), pushFooBar],
    ["pull and push granted in two entries", () => mint({ claims: { access: [{ type: "repository", name: "foo/bar", actions: ["push"] }, ...pullFooBar] } }), pushFooBar],
    ["no access claim, on /v2/ (needs nothing)", () => mint({ omit: ["access"] }), []],
    ["the catalog with registry:catalog:*", () => mint({ claims: { access: [{ type: "registry", name: "catalog", actions: ["*"] }] } }), [{ type: "registry", name: "catalog", actions: ["*"] }]],
  ];
  it.each(good)("%s", async (_name, make, needed = pullFooBar) => {
    expect(await authorizer.authorize(bearer(await make()), needed)).toEqual({ ok: true, subject: "alice@example.com" });
  });

  it("everything when token auth is off (settings undefined)", async () => {
    expect(await tokenAuthorizer(() => undefined).authorize(undefined, pushFooBar)).toEqual({ ok: true });
  });
});

describe("tokenAuthorizer refuses", () => {
  const invalid: [string, () => Promise<string> | string][] = [
    ["alg none", () => handMade({ alg: "none", typ: "JWT", kid: libtrustKeyId(signer.publicKey) }, claims(), () => "")],
    [
      "HS256 MACed with the bundle's PEM as the secret",
      () => handMade({ alg: "HS256", typ: "JWT", kid: libtrustKeyId(signer.publicKey) }, claims(), (i) => createHmac("sha256", settings.rootCertBundle).update(i).digest("base64url")),
    ],
    [
      "HS256 MACed with the signer's SPKI DER as the secret",
      () =>
        handMade({ alg: "HS256", typ: "JWT", kid: libtrustKeyId(signer.publicKey) }, claims(), (i) =>
          createHmac("sha256", signer.publicKey.export({ type: "spki", format: "der" })).update(i).digest("base64url"),
        ),
    ],
    ["ES384 (not an allowed algorithm)", () => mint({ alg: "ES384", key: generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey })],
    ["an unknown kid", () => mint({ key: stranger.privateKey, header: { kid: libtrustKeyId(stranger.publicKey) } })],
    ["a stranger's signature under the trusted kid (forged)", () => mint({ key: stranger.privateKey })],
    ["a stranger's signature under the trusted RFC 7638 kid", async () => mint({ key: stranger.privateKey, header: { kid: await jwkThumbprintKeyId(signer.publicKey) } })],
    [
      "a payload changed after signing (wider access)",
      async () => {
        const [h, , s] = (await mint()).split(".");
        return `${h}.${b64url(JSON.stringify(claims({ access: [{ type: "repository", name: "foo/bar", actions: ["*"] }] })))}.${s}`;
      },
    ],
    [
      "an ES256 signature in DER form (distribution needs raw r||s)",
      () => handMade({ alg: "ES256", typ: "JWT", kid: libtrustKeyId(signer.publicKey) }, claims(), (i) => cryptoSign("sha256", Buffer.from(i), signer.privateKey).toString("base64url")),
    ],
    ["no kid, x5c or jwk", () => mint({ header: {} })],
    ["x5c: a self-signed certificate outside the bundle", () => mint({ key: stranger.privateKey, header: { x5c: [der64(strangerCert)] } })],
    ["x5c: a chain to a stranger's root", () => mint({ key: strangerLeaf.privateKey, header: { x5c: [der64(strangerLeafCert), der64(strangerCert)] } })],
    ["x5c: a trusted chain, but the token signed by another key", () => mint({ key: stranger.privateKey, header: { x5c: [der64(leafCert), der64(intermediateCert)] } })],
    ["x5c: a leaf without its intermediate", () => mint({ key: leaf.privateKey, header: { x5c: [der64(leafCert)] } })],
    ["x5c: a chain through a certificate that is not a CA", () => mint({ key: nonCaIssued.privateKey, header: { x5c: [der64(nonCaIssuedCert), der64(directLeafCert)] } })],
    ["x5c: an expired leaf", () => mint({ key: expiredLeaf.privateKey, header: { x5c: [der64(expiredLeafCert)] } })],
    ["x5c: not base64 DER", () => mint({ header: { x5c: ["not a certificate!"] } })],
    ["x5c untrusted, even with a trusted kid (no fallback)", () => mint({ key: stranger.privateKey, header: { x5c: [der64(strangerCert)], kid: libtrustKeyId(signer.publicKey) } })],
    ["a jwk header holding a stranger's key", () => mint({ key: stranger.privateKey, header: { jwk: stranger.publicKey.export({ format: "jwk" }) } })],
    ["RS256 under the EC signer's kid (key type mismatch)", () => mint({ alg: "RS256", key: rsa.privateKey })],
    ["expired (exp 61+ s ago)", () => mint({ claims: { exp: now() - 120 } })],
    ["not yet valid (nbf 2 min ahead)", () => mint({ claims: { nbf: now() + 120 } })],
    ["no exp", () => mint({ omit: ["exp"] })],
    ["another issuer", () => mint({ claims: { iss: "auth server" } })],
    ["no issuer", () => mint({ omit: ["iss"] })],
    ["another audience", () => mint({ claims: { aud: "other.registry" } })],
    ["an audience array without the service", () => mint({ claims: { aud: ["other.registry"] } })],
    ["no audience", () => mint({ omit: ["aud"] })],
    ["garbage", () => "abc.def.ghi"],
    ["not a JWT at all", () => "cst_0123456789ab_secret"],
  ];
  it.each(invalid)("%s: invalid_token", async (_name, make) => {
    const decision = await authorizer.authorize(bearer(await make()), pullFooBar);
    expect(decision).toEqual({ ok: false, error: "invalid_token", challenge: `Bearer realm="${realm}",service="${service}",scope="repository:foo/bar:pull",error="invalid_token"` });
  });

  const narrow: [string, JWTPayload["access"], AccessEntry[]][] = [
    ["a token for repository A used on B", [{ type: "repository", name: "team/a", actions: ["pull", "push", "delete"] }], pullFooBar],
    ["a token for foo used on foo/bar", [{ type: "repository", name: "foo", actions: ["*"] }], pullFooBar],
    ["a pull-only token on a push", [{ type: "repository", name: "foo/bar", actions: ["pull"] }], pushFooBar],
    ["a push-only token on a push (pull missing)", [{ type: "repository", name: "foo/bar", actions: ["push"] }], pushFooBar],
    ["the catalog without registry:catalog:*", [{ type: "repository", name: "catalog", actions: ["*"] }], [{ type: "registry", name: "catalog", actions: ["*"] }]],
    ["malformed access entries", [{ type: "repository", name: "foo/bar", actions: "pull" }, "repository:foo/bar:pull"] as unknown as JWTPayload["access"], pullFooBar],
  ];
  it.each(narrow)("%s: insufficient_scope", async (_name, access, needed) => {
    const decision = await authorizer.authorize(bearer(await mint({ claims: { access } })), needed);
    expect(decision).toMatchObject({ ok: false, error: "insufficient_scope" });
    if (!decision.ok) expect(decision.challenge).toMatch(/,error="insufficient_scope"$/);
  });

  it("a missing or non-Bearer header with distribution's plain challenge (no error)", async () => {
    for (const header of [undefined, "", "Basic YWxpY2U6cHc=", "Bearer", "Bearer a b", `bearer  ${await mint()}`]) {
      expect(await authorizer.authorize(header, pushFooBar)).toEqual({ ok: false, challenge: `Bearer realm="${realm}",service="${service}",scope="repository:foo/bar:pull,push"` });
    }
  });

  it("everything when the bundle holds no certificate", async () => {
    const empty = tokenAuthorizer(() => ({ ...settings, rootCertBundle: "not a bundle" }));
    expect(await empty.authorize(bearer(await mint()), pullFooBar)).toMatchObject({ ok: false, error: "invalid_token" });
  });
});

describe("challenges and run-time settings", () => {
  it("are distribution's, scope per resource", () => {
    const s = { realm: "http://127.0.0.1:9999/token", service: "registry.local" };
    expect(bearerChallenge(s, [])).toBe('Bearer realm="http://127.0.0.1:9999/token",service="registry.local"');
    expect(bearerChallenge(s, [{ type: "registry", name: "catalog", actions: ["*"] }])).toBe('Bearer realm="http://127.0.0.1:9999/token",service="registry.local",scope="registry:catalog:*"');
    expect(bearerChallenge(s, [{ type: "repository", name: "foo/bar", actions: ["delete"] }])).toBe(
      'Bearer realm="http://127.0.0.1:9999/token",service="registry.local",scope="repository:foo/bar:delete"',
    );
    // A cross-repository mount: pull,push on the target and pull on the source, one scope each.
    expect(
      bearerChallenge(
        s,
        [
          { type: "repository", name: "a/b", actions: ["pull"] },
          { type: "repository", name: "a/b", actions: ["push"] },
          { type: "repository", name: "c", actions: ["pull"] },
        ],
        "insufficient_scope",
      ),
    ).toBe('Bearer realm="http://127.0.0.1:9999/token",service="registry.local",scope="repository:a/b:pull,push repository:c:pull",error="insufficient_scope"');
  });

  it("are read per request: a new service, issuer or bundle applies at once", async () => {
    let current: TokenAuthSettings | undefined = settings;
    const live = tokenAuthorizer(() => current);
    const token = await mint();
    expect((await live.authorize(bearer(token), pullFooBar)).ok).toBe(true);
    current = { ...settings, service: "renamed.registry" };
    expect(await live.authorize(bearer(token), pullFooBar)).toEqual({
      ok: false,
      error: "invalid_token",
      challenge: `Bearer realm="${realm}",service="renamed.registry",scope="repository:foo/bar:pull",error="invalid_token"`,
    });
    current = { ...settings, rootCertBundle: pem(rootCert) };
    expect(await live.authorize(bearer(token), pullFooBar)).toMatchObject({ ok: false, error: "invalid_token" });
    current = undefined;
    expect(await live.authorize(undefined, pullFooBar)).toEqual({ ok: true });
    current = settings;
    expect((await live.authorize(bearer(token), pullFooBar)).ok).toBe(true);
  });

  it("checks expiry against the injected clock", async () => {
    let clock = Date.now();
    const timed = tokenAuthorizer(() => settings, { now: () => clock });
    const token = await mint();
    expect((await timed.authorize(bearer(token), pullFooBar)).ok).toBe(true);
    clock += (300 + 59) * 1000;
    expect((await timed.authorize(bearer(token), pullFooBar)).ok).toBe(true);
    clock += 2_000;
    expect(await timed.authorize(bearer(token), pullFooBar)).toMatchObject({ ok: false, error: "invalid_token" });
  });
});
