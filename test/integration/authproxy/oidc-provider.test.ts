// Self-test of the test OpenID Provider (test/helpers/oidc-provider.ts), with no proxy: a hand-built
// authorization code flow with PKCE against it, ending at a local callback server standing in for
// the proxy's /_sso/ endpoint, then the token request and ID token checks the proxy will make.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browse, CookieJar, LOGIN_PAGE_HEADER, startTestProvider, type TestProvider } from "../../helpers/oidc-provider.ts";

const CLIENT_ID = "proxy";
const CLIENT_SECRET = "proxy-secret";
const ID_TOKEN_TTL = 120;

interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
}

let callbackServer: Server;
let redirectUri: string;
/** Raw request targets (path + query, as received) of every callback request. */
const callbacks: string[] = [];
let idp: TestProvider;
let discovery: Discovery;

beforeAll(async () => {
  callbackServer = createServer((req, res) => {
    callbacks.push(req.url ?? "");
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("callback received");
  });
  await new Promise<void>((resolve) => callbackServer.listen(0, "127.0.0.1", resolve));
  redirectUri = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/_sso/`;
  idp = await startTestProvider({
    clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: [redirectUri] }],
    accounts: {
      alice: { email: "alice@example.com", groups: ["dev", "ops"] },
      bob: { email: "bob@example.com", email_verified: false, groups: [], scopes: ["password"] },
      carol: { email: "carol@example.com", password: "right" },
    },
    idTokenTtlSeconds: ID_TOKEN_TTL,
  });
  const res = await fetch(`${idp.issuer}/.well-known/openid-configuration`);
  discovery = (await res.json()) as Discovery;
});

afterAll(async () => {
  await idp?.stop();
  callbackServer?.closeAllConnections();
  await new Promise<void>((resolve) => (callbackServer ? callbackServer.close(() => resolve()) : resolve()));
});

interface Authorized {
  /** The callback request target exactly as the callback server received it. */
  raw: string;
  query: URLSearchParams;
  verifier: string;
  nonce: string;
}

/** Run the browser part of the code flow as `sub` from a hand-built authorization URL. */
async function authorize(
  jar: CookieJar,
  sub: string,
  o: { scope?: string; pkce?: boolean; password?: string; deny?: boolean } = {},
): Promise<Authorized> {
  const verifier = randomBytes(32).toString("base64url");
  const nonce = randomBytes(16).toString("base64url");
  const params = new URLSearchParams({
    response_type: "code",
    client_id: CLIENT_ID,
    redirect_uri: redirectUri,
    scope: o.scope ?? "openid password",
    state: "abc:%2Fpage",
    nonce,
  });
  if (o.pkce ?? true) {
    params.set("code_challenge", createHash("sha256").update(verifier).digest("base64url"));
    params.set("code_challenge_method", "S256");
  }
  const before = callbacks.length;
  const { final, finalUrl } = await browse(jar, `${discovery.authorization_endpoint}?${params}`, {
    login: { sub, password: o.password, deny: o.deny },
  });
  expect(final.status, `final response at ${finalUrl}`).toBe(200);
  await final.text();
  expect(callbacks).toHaveLength(before + 1);
  const raw = callbacks[before] ?? "";
  expect(raw.startsWith("/_sso/?")).toBe(true);
  return { raw, query: new URL(raw, redirectUri).searchParams, verifier, nonce };
}

/** The token request as the proxy makes it: form body with client credentials and the PKCE verifier. */
async function redeem(code: string, verifier: string): Promise<Response> {
  return fetch(discovery.token_endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uri: redirectUri,
      code_verifier: verifier,
    }),
  });
}

async function idTokenFor(a: Authorized): Promise<string> {
  const code = a.query.get("code");
  expect(code, `callback ${a.raw}`).toBeTruthy();
  const res = await redeem(code ?? "", a.verifier);
  const body = (await res.json()) as { id_token?: string; error?: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  expect(typeof body.id_token).toBe("string");
  return body.id_token ?? "";
}

describe("test OpenID Provider", () => {
  let jwks: ReturnType<typeof createRemoteJWKSet>;
  let aliceJar: CookieJar;
  let aliceToken: string;

  it("advertises a loopback issuer, RS256 and client_secret_post", async () => {
    expect(idp.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const d = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    expect(d.issuer).toBe(idp.issuer);
    expect(d.id_token_signing_alg_values_supported).toEqual(["RS256"]);
    expect(d.token_endpoint_auth_methods_supported).toContain("client_secret_post");
    expect(d.code_challenge_methods_supported).toEqual(["S256"]);
    expect(d.scopes_supported).toEqual(expect.arrayContaining(["openid", "password", "sms", "otp"]));
  });

  it("logs in, returns code and the state byte-identical, and issues a verifiable ID token", async () => {
    aliceJar = new CookieJar();
    const a = await authorize(aliceJar, "alice");
    expect(a.query.get("state")).toBe("abc:%2Fpage");
    expect(a.raw).toContain("state=abc%3A%252Fpage");
    expect(a.query.get("iss")).toBe(idp.issuer);
    expect(a.query.get("error")).toBeNull();

    aliceToken = await idTokenFor(a);
    // A long cool-down as the proxy would configure; the rotation test below uses its own set.
    jwks = createRemoteJWKSet(new URL(discovery.jwks_uri), { cooldownDuration: 30_000 });
    const { payload, protectedHeader } = await jwtVerify(aliceToken, jwks, {
      issuer: idp.issuer,
      audience: CLIENT_ID,
      algorithms: ["RS256"],
    });
    expect(protectedHeader.alg).toBe("RS256");
    expect(protectedHeader.kid).toBe(idp.signingKeys[0]?.kid);
    expect(payload).toMatchObject({
      sub: "alice",
      email: "alice@example.com",
      email_verified: true,
      groups: ["dev", "ops"],
      nonce: a.nonce,
      scope: "openid password",
      aud: CLIENT_ID,
      iss: idp.issuer,
    });
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(ID_TOKEN_TTL);
  });

  it("the code is single-use and needs the right PKCE verifier", async () => {
    const jar = new CookieJar();
    const a = await authorize(jar, "alice");
    const code = a.query.get("code") ?? "";
    const wrong = await redeem(code, randomBytes(32).toString("base64url"));
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: string }).error).toBe("invalid_grant");

    const b = await authorize(jar, "alice"); // silent: the provider session from above
    expect(await idTokenFor(b)).toBeTruthy();
    const again = await redeem(b.query.get("code") ?? "", b.verifier);
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: string }).error).toBe("invalid_grant");
  });

  it("grants arbitrary auth_type scopes, and an account limited to fewer scopes gets fewer", async () => {
    const verify = async (token: string): Promise<JWTPayload> =>
      (await jwtVerify(token, jwks, { issuer: idp.issuer, audience: CLIENT_ID })).payload;

    const all = await verify(await idTokenFor(await authorize(new CookieJar(), "alice", { scope: "openid password sms otp" })));
    expect(all.scope).toBe("openid password sms otp");

    const bob = await authorize(new CookieJar(), "bob", { scope: "openid password sms" });
    expect(bob.query.get("error")).toBeNull();
    const bobClaims = await verify(await idTokenFor(bob));
    expect(bobClaims).toMatchObject({ sub: "bob", email: "bob@example.com", email_verified: false, groups: [], scope: "openid password" });

    // A scope the provider does not support is dropped, not an error.
    const odd = await verify(await idTokenFor(await authorize(new CookieJar(), "alice", { scope: "openid password unknown-scope" })));
    expect(odd.scope).toBe("openid password");
  });

  it("counts requests by path: one JWKS fetch while the key is known", async () => {
    // Tokens so far: alice, alice silent (+1 refused verifier, +1 replay), alice all, bob, alice odd.
    expect(idp.hits.get("/token")).toBe(7);
    expect(idp.hits.get("/jwks")).toBe(1);
    expect(idp.hits.get("/.well-known/openid-configuration")).toBe(2);
    expect(idp.hits.get("/auth")).toBeGreaterThanOrEqual(6);
  });

  it("rotateKey signs new ID tokens with a new kid; sessions survive; the old key stays published", async () => {
    const oldKid = decodeProtectedHeader(aliceToken).kid;
    await idp.rotateKey();
    expect(idp.signingKeys.map((k) => k.kid)).toEqual([expect.any(String), oldKid]);
    const newKid = idp.signingKeys[0]?.kid;
    expect(newKid).not.toBe(oldKid);

    const a = await authorize(aliceJar, "alice"); // no login page: the session outlived the rotation
    const token = await idTokenFor(a);
    expect(decodeProtectedHeader(token).kid).toBe(newKid);

    const jwksHits = idp.hits.get("/jwks") ?? 0;
    // Unknown kid: a remote JWK set refetches (no cool-down here), the old key still verifies.
    const fresh = createRemoteJWKSet(new URL(discovery.jwks_uri), { cooldownDuration: 0 });
    await jwtVerify(aliceToken, fresh, { issuer: idp.issuer, audience: CLIENT_ID });
    expect(idp.hits.get("/jwks")).toBe(jwksHits + 1);
    // The first set fetched /jwks moments ago: within its 30 s cool-down the new kid stays unknown.
    await expect(jwtVerify(token, jwks, { issuer: idp.issuer, audience: CLIENT_ID })).rejects.toMatchObject({
      code: "ERR_JWKS_NO_MATCHING_KEY",
    });
    expect(idp.hits.get("/jwks")).toBe(jwksHits + 1);
    const reloaded = createRemoteJWKSet(new URL(discovery.jwks_uri));
    const { payload } = await jwtVerify(token, reloaded, { issuer: idp.issuer, audience: CLIENT_ID });
    expect(payload.sub).toBe("alice");
  });

  it("signToken crafts tokens with the real key (e.g. a wrong audience)", async () => {
    const now = Math.floor(Date.now() / 1000);
    const forged = await idp.signToken({ iss: idp.issuer, sub: "alice", aud: "someone-else", iat: now, exp: now + 60 });
    const set = createRemoteJWKSet(new URL(discovery.jwks_uri));
    await expect(jwtVerify(forged, set, { issuer: idp.issuer, audience: CLIENT_ID })).rejects.toMatchObject({
      code: "ERR_JWT_CLAIM_VALIDATION_FAILED",
      claim: "aud",
    });
    const { payload } = await jwtVerify(forged, set, { issuer: idp.issuer });
    expect(payload.aud).toBe("someone-else");
  });

  it("refuses an authorization request without PKCE by default (error=invalid_request at the callback)", async () => {
    const a = await authorize(new CookieJar(), "alice", { pkce: false });
    expect(a.query.get("error")).toBe("invalid_request");
    expect(a.query.get("error_description")).toMatch(/PKCE/);
    expect(a.query.get("state")).toBe("abc:%2Fpage");
    expect(a.query.get("code")).toBeNull();
  });

  it("login page: shown without login, wrong password re-shows it, deny returns access_denied", async () => {
    const params = new URLSearchParams({
      response_type: "code",
      client_id: CLIENT_ID,
      redirect_uri: redirectUri,
      scope: "openid",
      state: "s",
      code_challenge: createHash("sha256").update("v".repeat(43)).digest("base64url"),
      code_challenge_method: "S256",
    });
    const start = `${discovery.authorization_endpoint}?${params}`;
    const shown = await browse(new CookieJar(), start);
    expect(shown.final.status).toBe(200);
    expect(shown.final.headers.get(LOGIN_PAGE_HEADER)).toBe("login");
    expect(new URL(shown.finalUrl).pathname).toMatch(/^\/interaction\//);
    expect(await shown.final.text()).toContain("<form");

    const wrong = await browse(new CookieJar(), start, { login: { sub: "carol", password: "wrong" } });
    expect(wrong.final.headers.get(LOGIN_PAGE_HEADER)).toBe("login");
    expect(wrong.hops.filter((h) => h.method === "POST")).toHaveLength(1);
    await wrong.final.body?.cancel();

    const right = await authorize(new CookieJar(), "carol", { password: "right" });
    expect(right.query.get("code")).toBeTruthy();

    const denied = await authorize(new CookieJar(), "alice", { deny: true });
    expect(denied.query.get("error")).toBe("access_denied");
  });

  it("stopAt intercepts the callback redirect without following it", async () => {
    const before = callbacks.length;
    const params = new URLSearchParams({
      response_type: "code",
      client_id: CLIENT_ID,
      redirect_uri: redirectUri,
      scope: "openid",
      state: "x",
      code_challenge: createHash("sha256").update("v".repeat(43)).digest("base64url"),
      code_challenge_method: "S256",
    });
    const r = await browse(new CookieJar(), `${discovery.authorization_endpoint}?${params}`, {
      login: { sub: "alice" },
      stopAt: (u) => u.href.startsWith(redirectUri),
    });
    expect(r.stopped).toBe(true);
    expect(r.final.status).toBe(303);
    expect(new URL(r.finalUrl).searchParams.get("code")).toBeTruthy();
    expect(r.hops.map((h) => [h.method, new URL(h.url).pathname.replace(/\/[^/]{10,}$/, "/:uid"), h.status])).toEqual([
      ["GET", "/auth", 303],
      ["GET", "/interaction/:uid", 200],
      ["POST", "/interaction/:uid", 303],
      ["GET", "/auth/:uid", 303],
    ]);
    expect(callbacks).toHaveLength(before);
  });

  it("serves no server errors", () => {
    expect(idp.serverErrors).toEqual([]);
  });
});

describe("test OpenID Provider with pkceRequired: false", () => {
  it("completes a flow without PKCE", async () => {
    const lax = await startTestProvider({
      clients: [{ client_id: "c", client_secret: "s", redirect_uris: [redirectUri] }],
      accounts: { dave: { email: "dave@example.com" } },
      pkceRequired: false,
    });
    try {
      const params = new URLSearchParams({ response_type: "code", client_id: "c", redirect_uri: redirectUri, scope: "openid sms", state: "st" });
      const r = await browse(new CookieJar(), `${lax.issuer}/auth?${params}`, { login: { sub: "dave" }, stopAt: (u) => u.href.startsWith(redirectUri) });
      const code = new URL(r.finalUrl).searchParams.get("code") ?? "";
      expect(code).toBeTruthy();
      const res = await fetch(`${lax.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "authorization_code", code, client_id: "c", client_secret: "s", redirect_uri: redirectUri }),
      });
      const body = (await res.json()) as { id_token: string };
      expect(res.status).toBe(200);
      const { payload } = await jwtVerify(body.id_token, createRemoteJWKSet(new URL(`${lax.issuer}/jwks`)), { issuer: lax.issuer, audience: "c" });
      expect(payload).toMatchObject({ sub: "dave", email: "dave@example.com", scope: "openid sms" });
      expect(payload.nonce).toBeUndefined();
    } finally {
      await lax.stop();
    }
  });
});

describe("CookieJar", () => {
  it("scopes by origin and path, and deletes on Max-Age=0 or a past Expires", () => {
    const jar = new CookieJar();
    const a = "http://127.0.0.1:1000";
    jar.store(`${a}/app/login`, ["root=1; Path=/; HttpOnly", "dflt=2", "deep=3; Path=/app/x", "gone=4; Max-Age=0", "old=5; Expires=Thu, 01 Jan 1970 00:00:00 GMT"]);
    expect(jar.cookieHeader(`${a}/app/x/y`)).toBe("deep=3; dflt=2; root=1");
    expect(jar.cookieHeader(`${a}/application`)).toBe("root=1");
    expect(jar.cookieHeader("http://127.0.0.1:2000/app/x")).toBe("");
    expect(jar.get(a, "dflt")).toBe("2");
    expect(jar.get(a, "gone")).toBeUndefined();

    jar.store(`${a}/`, ["root=changed; Path=/", "dflt=x; Path=/app; Max-Age=0", "later=6; Max-Age=60"]);
    expect(jar.cookieHeader(`${a}/app/x`)).toBe("deep=3; root=changed; later=6");
    jar.set(a, "forged", "v");
    jar.delete(a, "root");
    expect(jar.cookieHeader(`${a}/`)).toBe("later=6; forged=v");
  });
});
