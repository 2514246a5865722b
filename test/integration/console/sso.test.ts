// The console's single sign-on (docs/console.md#single-sign-on) against a real OpenID provider
// (oidc-provider, test/helpers/oidc-provider.ts): start, the provider's login driven over HTTP,
// token; the token works on whoami with the role the e-mail maps to; every refused case (unverified
// e-mail, bad or replayed state, wrong verifier, other redirect_uri, non-loopback redirect_uri, a
// code the provider refuses) answers without a token record written. On a private SQLite store.
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";
import { createConsoleApi, createSsoLogin, ensureAdminToken, ensureSsoStateKey, generateToken, SsoError, tokenKey, tokensPrefix, type SsoLogin } from "../../../api/console/index.ts";
import { browse, CookieJar, startTestProvider, type TestProvider } from "../../helpers/oidc-provider.ts";
import { call, MovableClock, serveApp, type Served } from "./harness.ts";

const clientId = "capstan-console";
const clientSecret = randomBytes(24).toString("base64url");
// Nothing listens here: browse stops at the redirect to it, as a CLI's listener would take it.
const redirectUri = "http://127.0.0.1:41999/callback";

let idp: TestProvider;
const store = new SqliteStore({ path: ":memory:" });
const admin = generateToken();
let served: Served;
let sso: SsoLogin;
let stateKey: Buffer;

beforeAll(async () => {
  idp = await startTestProvider({
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: ["http://127.0.0.1/callback"], application_type: "native" }],
    accounts: {
      alice: { email: "Alice@Example.com" },
      bob: { email: "bob@example.com" },
      eve: { email: "eve@example.com", email_verified: false },
      nomail: { email: "" },
    },
  });
  await ensureAdminToken({ store, envToken: admin.token });
  stateKey = (await ensureSsoStateKey(store)).key;
  sso = createSsoLogin({ store, stateKey, settings: { issuer: idp.issuer, clientId, clientSecret, admins: ["ALICE@example.com"], tokenTtlMs: 3_600_000 } });
  const verifier = new TokenVerifier({ store });
  served = await serveApp(createConsoleApi({ store, gate: tokenGate(verifier), changed: () => verifier.forget(), sso }));
  const app = await call(served.base, "POST", "/api/v1/apps", { token: admin.token, body: { appname: "shop", maintainers: ["bob@example.com"] } });
  expect(app.status).toBe(201);
});

afterAll(async () => {
  await served?.close();
  await idp?.stop();
  await store.close();
});

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

async function tokenCount(): Promise<number> {
  return (await store.list(tokensPrefix)).items.length;
}

/** start, then the provider's login as `sub`; answers what the callback would carry. */
async function loginAt(sub: string, redirect = redirectUri): Promise<{ code: string; state: string; verifier: string; startState: string; authorizationUrl: string }> {
  const { verifier, challenge } = pkce();
  const started = await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: redirect, code_challenge: challenge } });
  expect(started.status, started.text).toBe(200);
  const authorizationUrl = started.body.authorization_url as string;
  const r = await browse(new CookieJar(), authorizationUrl, { login: { sub }, stopAt: (u) => u.href.startsWith(redirect) });
  expect(r.stopped, JSON.stringify(r.hops, null, 1)).toBe(true);
  const cb = new URL(r.finalUrl);
  expect(cb.searchParams.get("error")).toBeNull();
  return { code: cb.searchParams.get("code")!, state: cb.searchParams.get("state")!, verifier, startState: started.body.state as string, authorizationUrl };
}

const finish = (b: { code: string; state: string; verifier: string }, redirect = redirectUri) =>
  call(served.base, "POST", "/api/v1/sso/token", { body: { code: b.code, state: b.state, code_verifier: b.verifier, redirect_uri: redirect } });

describe("console SSO", () => {
  it("asks the provider for a code with PKCE S256, a nonce and a signed state", async () => {
    const { challenge } = pkce();
    const started = await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: redirectUri, code_challenge: challenge } });
    expect(started.status).toBe(200);
    const u = new URL(started.body.authorization_url as string);
    expect(`${u.origin}${u.pathname}`).toBe(`${idp.issuer}/auth`);
    const q = u.searchParams;
    expect(q.get("response_type")).toBe("code");
    expect(q.get("client_id")).toBe(clientId);
    expect(q.get("redirect_uri")).toBe(redirectUri);
    expect(q.get("scope")).toBe("openid email");
    expect(q.get("code_challenge")).toBe(challenge);
    expect(q.get("code_challenge_method")).toBe("S256");
    expect(q.get("nonce")).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(q.get("state")).toBe(started.body.state);
    // The secret never leaves the console.
    expect(started.text).not.toContain(clientSecret);
    expect(u.href).not.toContain(clientSecret);
  });

  it("logs an -oidc-admins e-mail in as admin; the token works and is marked as made by SSO", async () => {
    const before = Date.now();
    const b = await loginAt("alice");
    expect(b.state).toBe(b.startState);
    const res = await finish(b);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ user: "alice@example.com", role: "admin" });
    const token = res.body.token as string;
    expect(token).toMatch(/^cst_[0-9a-f]{12}_/);
    const expires = Date.parse(res.body.expires_at as string);
    expect(expires).toBeGreaterThanOrEqual(before + 3_600_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 3_600_000 + 1000);
    const me = await call(served.base, "GET", "/api/v1/whoami", { token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: res.body.id, user: "alice@example.com", role: "admin", allApps: true, expiresAt: res.body.expires_at });
    const record = JSON.parse((await store.get(tokenKey(res.body.id as string)))!.value) as Record<string, unknown>;
    expect(record).toMatchObject({ user: "alice@example.com", role: "admin", origin: "sso" });
    expect(JSON.stringify(record)).not.toContain(token.slice(17));
    const listed = await call(served.base, "GET", "/api/v1/tokens", { token });
    expect((listed.body as unknown as { id: string; origin?: string }[]).find((t) => t.id === res.body.id)?.origin).toBe("sso");
  });

  it("logs anyone else in as user, with the apps that list them as maintainer", async () => {
    const res = await finish(await loginAt("bob"));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ user: "bob@example.com", role: "user" });
    const me = await call(served.base, "GET", "/api/v1/whoami", { token: res.body.token as string });
    expect(me.body).toMatchObject({ user: "bob@example.com", role: "user", apps: ["shop"], allApps: false });
    const role = await call(served.base, "GET", "/api/v1/repos/shop/roles/", { token: res.body.token as string });
    expect(role.body).toEqual({ role: { role: "maintainer" } });
    // A user token is not an admin's.
    expect((await call(served.base, "GET", "/api/v1/tokens", { token: res.body.token as string })).status).toBe(403);
  });

  it("refuses an e-mail the provider does not vouch for (403), and mints nothing", async () => {
    const b = await loginAt("eve");
    const n = await tokenCount();
    const res = await finish(b);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("Forbidden");
    expect(res.body.message).toMatch(/verified/);
    const none = await finish(await loginAt("nomail"));
    expect(none.status).toBe(403);
    expect(none.body.message).toMatch(/no usable e-mail address \(no email claim\)/);
    expect(await tokenCount()).toBe(n);
  });

  it("refuses a bad state, a wrong verifier, another redirect_uri and a replayed state with 400, minting nothing", async () => {
    const b = await loginAt("bob");
    const n = await tokenCount();
    const parts = b.state.split(".");
    const forged = [parts[0], Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(parts[1]!, "base64url").toString()), r: "http://127.0.0.1:1/x" })).toString("base64url"), parts[2]].join(".");
    for (const [what, state] of [
      ["garbage", "nonsense"],
      ["bad mac", `${parts[0]}.${parts[1]}.${parts[2]!.slice(0, -2)}AA`],
      ["changed payload", forged],
    ] as const) {
      const res = await finish({ ...b, state });
      expect(res.status, what).toBe(400);
      expect(res.body.details?.[0]?.path, what).toBe("state");
    }
    const wrongVerifier = await finish({ ...b, verifier: pkce().verifier });
    expect(wrongVerifier.status).toBe(400);
    expect(wrongVerifier.body.message).toMatch(/code_verifier/);
    const otherRedirect = await finish(b, "http://127.0.0.1:41998/callback");
    expect(otherRedirect.status).toBe(400);
    expect(otherRedirect.body.message).toMatch(/redirect_uri/);
    expect(await tokenCount()).toBe(n);
    // The failures above did not spend the state: the real client still finishes, once.
    const ok = await finish(b);
    expect(ok.status, ok.text).toBe(200);
    const replay = await finish(b);
    expect(replay.status).toBe(400);
    expect(replay.body.message).toMatch(/already used/);
    expect(await tokenCount()).toBe(n + 1);
  });

  it("refuses redirect URIs that are not a loopback callback with a port (400), at start and at token", async () => {
    const { challenge, verifier } = pkce();
    for (const uri of ["https://evil.example/callback", "http://10.0.0.1:8080/callback", "http://127.0.0.1/callback", "http://user:pw@127.0.0.1:41999/cb", "http://127.0.0.1:41999/cb#x", "ftp://127.0.0.1:21/x"]) {
      const res = await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: uri, code_challenge: challenge } });
      expect(res.status, uri).toBe(400);
      expect(res.body.details?.[0]?.path, uri).toBe("redirect_uri");
    }
    for (const uri of ["http://[::1]:41999/callback", "http://localhost:41999/callback"]) {
      expect((await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: uri, code_challenge: challenge } })).status, uri).toBe(200);
    }
    const n = await tokenCount();
    const res = await call(served.base, "POST", "/api/v1/sso/token", { body: { code: "x", state: "v1.a.b", code_verifier: verifier, redirect_uri: "https://evil.example/callback" } });
    expect(res.status).toBe(400);
    expect(await tokenCount()).toBe(n);
    // A bad challenge, an unknown field.
    expect((await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: redirectUri, code_challenge: "short" } })).status).toBe(400);
    expect((await call(served.base, "POST", "/api/v1/sso/start", { body: { redirect_uri: redirectUri, code_challenge: challenge, extra: 1 } })).status).toBe(400);
  });

  it("answers 400 when the provider refuses the code, and spends the state", async () => {
    const b = await loginAt("bob");
    const n = await tokenCount();
    const res = await finish({ ...b, code: "not-a-code" });
    expect(res.status, res.text).toBe(400);
    expect(res.body.message).toMatch(/refused the code/);
    expect((await finish(b)).status).toBe(400);
    expect(await tokenCount()).toBe(n);
  });

  it("lets an in-process caller use its own callback URL; another replica on the store's key finishes it; states expire after 10 minutes", async () => {
    const own = "https://console.example.com/ui/login/callback";
    const { verifier, challenge } = pkce();
    const started = await sso.start({ redirectUri: own, codeChallenge: challenge });
    expect(new URL(started.authorizationUrl).searchParams.get("redirect_uri")).toBe(own);
    // Over HTTP such a state is refused: the endpoint takes loopback callbacks only.
    const viaHttp = await call(served.base, "POST", "/api/v1/sso/token", { body: { code: "c", state: started.state, code_verifier: verifier, redirect_uri: own } });
    expect(viaHttp.status).toBe(400);

    const clock = new MovableClock();
    const replica = createSsoLogin({ store, stateKey: (await ensureSsoStateKey(store)).key, clock, settings: { issuer: idp.issuer, clientId, clientSecret, admins: [], tokenTtlMs: 60_000 } });
    const b = await loginAt("alice");
    const done = await replica.finish({ code: b.code, state: b.state, codeVerifier: b.verifier, redirectUri });
    expect(done).toMatchObject({ user: "alice@example.com", role: "user" });

    const late = await loginAt("bob");
    clock.offsetMs = 10 * 60_000 + 1000;
    const n = await tokenCount();
    await expect(replica.finish({ code: late.code, state: late.state, codeVerifier: late.verifier, redirectUri })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/expired/) });
    await expect(replica.finish({ code: late.code, state: late.state, codeVerifier: late.verifier, redirectUri })).rejects.toBeInstanceOf(SsoError);
    expect(await tokenCount()).toBe(n);
  });

  it("answers 404 with a clear message when SSO is off", async () => {
    const verifier = new TokenVerifier({ store });
    const off = await serveApp(createConsoleApi({ store, gate: tokenGate(verifier) }));
    try {
      for (const path of ["/api/v1/sso/start", "/api/v1/sso/token"]) {
        const res = await call(off.base, "POST", path, { body: {} });
        expect(res.status, path).toBe(404);
        expect(res.body.message).toMatch(/single sign-on is not configured.*-oidc-issuer/);
      }
    } finally {
      await off.close();
    }
  });
});
