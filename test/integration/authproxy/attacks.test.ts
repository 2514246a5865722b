// Attacks on the auth proxy, one table per kind: the open redirect through the login's state, csrf
// and login CSRF, token substitution, identity header spoofing, forged and broken ID tokens,
// cookies, path tricks against the location rules, WebSocket upgrades, /_sso/ under a catch-all
// regex, caching and request smuggling (docs/authproxy.md). Every case looks at what the upstream
// received (which path, which identity headers, which cookies) or checks that it received nothing.
// Requests whose spelling matters (header names, duplicates, raw paths) go over node:net as bytes.
import { createPublicKey } from "node:crypto";
import { connect } from "node:net";
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type JWK, type JWTHeaderParameters, type JWTPayload } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CsrfSigner } from "../../../api/authproxy/csrf.ts";
import { headerValues, headerValuesAnySpelling, type RecordedRequest } from "../../helpers/echo-upstream.ts";
import { browse, CookieJar } from "../../helpers/oidc-provider.ts";
import { accounts, clientId, clientSecret, parseSetCookie, startProxyHarness, type ProxyHarness } from "./harness.ts";

let h: ProxyHarness;
/** Holds alice's session at the provider, so later logins go straight from /auth to the callback. */
let idpJar: CookieJar;
/** alice's sso cookie value: a session for every location of the harness (password sms, groups). */
let aliceSso: string;

const alice = "alice@example.com";
const callbackPath = "/_sso/";

beforeAll(async () => {
  h = await startProxyHarness();
  idpJar = new CookieJar();
  const r = await browse(idpJar, `${h.url}/admin/setup`, { login: { sub: "alice" } });
  expect(r.final.status, JSON.stringify(r.hops)).toBe(200);
  aliceSso = idpJar.get(h.url, "sso")!;
  expect(decodeJwt(aliceSso).scope).toBe("openid password sms");
});
afterAll(async () => {
  await h?.stop();
});

// ---------------------------------------------------------------------------------------------
// Helpers

const hits = (path: string) => h.idp.hits.get(path) ?? 0;

/** Run `act`; the upstream must have received nothing meanwhile. The proxy forwards before it answers, so the answer is the observable. */
async function nothingForwarded<T>(act: () => Promise<T>, what = ""): Promise<T> {
  const before = h.upstream.requests.length;
  const out = await act();
  expect(
    h.upstream.requests.slice(before).map((r) => `${r.method} ${r.url}`),
    `${what}: the upstream must receive nothing`,
  ).toEqual([]);
  return out;
}

/** Run `act`; the upstream must have received exactly one request meanwhile, which is returned. */
async function forwardedOnce<T>(act: () => Promise<T>, what = ""): Promise<{ out: T; rec: RecordedRequest }> {
  const before = h.upstream.requests.length;
  const out = await act();
  const recs = h.upstream.requests.slice(before);
  expect(recs.map((r) => `${r.method} ${r.url}`), `${what}: the upstream must receive one request`).toHaveLength(1);
  return { out, rec: recs[0]! };
}

interface RawAnswer {
  /** 0 when the connection closed without an answer. */
  status: number;
  rawHeaders: string[];
  body: string;
}

function parseAnswer(buf: string): RawAnswer {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return { status: 0, rawHeaders: [], body: buf };
  const lines = buf.slice(0, end).split("\r\n");
  const rawHeaders: string[] = [];
  for (const l of lines.slice(1)) {
    const colon = l.indexOf(":");
    rawHeaders.push(l.slice(0, colon), l.slice(colon + 1).trim());
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1] ?? 0), rawHeaders, body: buf.slice(end + 4) };
}

const values = (a: { rawHeaders: readonly string[] }, name: string) => headerValues(a, name);

/** Send `text` byte for byte on a new connection; read the answer until its body is whole, a 101, or the connection closes. */
function rawExchange(text: string, port = h.port): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let buf = "";
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      s.destroy();
      if (err) reject(err);
      else resolve(parseAnswer(buf));
    };
    const timer = setTimeout(() => finish(new Error(`no complete answer within 5 s to ${JSON.stringify(text.slice(0, 80))}; got ${JSON.stringify(buf.slice(0, 300))}`)), 5_000);
    s.on("data", (d: Buffer) => {
      buf += d.toString("latin1");
      const a = parseAnswer(buf);
      if (a.status === 101) return finish();
      const cl = values(a, "content-length")[0];
      if (a.status !== 0 && cl !== undefined && Buffer.byteLength(a.body, "latin1") >= Number(cl)) finish();
    });
    s.on("close", () => finish());
    // A reset after Node's 400: what arrived is the answer.
    s.on("error", () => finish());
    s.write(text, "latin1");
  });
}

/** One request as raw bytes: `headers` as [name, value] pairs sent as given, or whole raw lines; Host and (unless given) Connection: close added. */
function rawRequest(method: string, target: string, headers: ([string, string] | string)[] = [], opts: { body?: string; port?: number } = {}): Promise<RawAnswer> {
  const port = opts.port ?? h.port;
  const lines = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`];
  for (const x of headers) lines.push(typeof x === "string" ? x : `${x[0]}: ${x[1]}`);
  if (!headers.some((x) => /^connection\s*:/i.test(typeof x === "string" ? x : `${x[0]}:`))) lines.push("Connection: close");
  return rawExchange(`${lines.join("\r\n")}\r\n\r\n${opts.body ?? ""}`, port);
}

/** The proxy's login redirect: 302 to the provider's authorization endpoint. */
function expectLoginRedirect(status: number, location: string | undefined | null, what: string, harness = h): void {
  expect(status, what).toBe(302);
  expect(location ?? "", what).toMatch(new RegExp(`^${harness.oidc.endpoints.authorization.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\?`));
}

interface Login {
  csrf: string;
  code: string;
  /** The callback URL the provider sent the browser to (not followed). */
  callback: URL;
}

/**
 * A real login up to the callback: the proxy's 302 (and its signed csrf cookie), then the provider,
 * where alice is logged in already; stops before the callback. The jar's proxy cookies are dropped
 * first, so every login has a csrf value of its own.
 */
async function loginUntilCallback(path = "/app/login", jar = idpJar, harness = h): Promise<Login> {
  jar.delete(harness.url, "sso_csrf");
  jar.delete(harness.url, "sso");
  const r = await browse(jar, `${harness.url}${path}`, {
    login: { sub: "alice" },
    stopAt: (u) => u.origin === harness.url && u.pathname === callbackPath,
  });
  expect(r.stopped, JSON.stringify(r.hops)).toBe(true);
  const callback = new URL(r.finalUrl);
  const code = callback.searchParams.get("code");
  expect(code, r.finalUrl).toBeTruthy();
  const csrf = jar.get(harness.url, "sso_csrf")!;
  expect(callback.searchParams.get("state")!.startsWith(`${csrf}:`)).toBe(true);
  return { csrf, code: code!, callback };
}

/** GET the callback with `query` (object: encoded with URLSearchParams; string: sent as is) and an optional Cookie header. */
function callCallback(query: Record<string, string> | string, cookie?: string): Promise<Response> {
  const qs = typeof query === "string" ? query : new URLSearchParams(query).toString();
  return fetch(`${h.url}${callbackPath}?${qs}`, { redirect: "manual", headers: cookie === undefined ? {} : { cookie } });
}

const setCookies = (res: Response) => res.headers.getSetCookie().map(parseSetCookie);
const ssoSet = (res: Response) => setCookies(res).find((c) => c.name === "sso" && c.value !== "");

/**
 * A dead end of the login: an HTML page (never a redirect) that sets no session. `spent`: the csrf
 * value was used up before this answer (the code was tried, or the provider answered an error),
 * so the answer clears its cookie.
 */
async function expectDeadEnd(res: Response, status: number, what: string, mention?: string, spent = false): Promise<void> {
  expect(res.status, what).toBe(status);
  expect(res.headers.get("location"), what).toBeNull();
  expect(res.headers.get("content-type"), what).toMatch(/^text\/html/);
  expect(ssoSet(res), what).toBeUndefined();
  if (spent) expect(setCookies(res).find((c) => c.name === "sso_csrf")?.attrs.get("max-age"), `${what}: the csrf cookie cleared`).toBe("0");
  const body = await res.text();
  if (mention !== undefined) expect(body, what).toContain(mention);
}

/** A Location that stays on the proxy's origin: a path with one leading slash, nothing a browser reads as another host. */
function expectSameOriginPath(location: string, what: string): void {
  expect(location, what).toMatch(/^\/(?![/\\])/);
  // eslint-disable-next-line no-control-regex
  expect(location, what).not.toMatch(/[\x00-\x20\x7f-\uffff\\]/);
  expect(new URL(location, h.url).origin, what).toBe(h.url);
}

const now = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------------------------------------

describe("open redirect through the state", () => {
  const q = encodeURIComponent;
  // `part` is the state's second part exactly as the callback reads it (after the query's own
  // decoding); the proxy unquotes it once. `location` when the answer is not "/".
  const cases: { name: string; part: string; location?: string }[] = [
    { name: "//evil.com", part: q("//evil.com") },
    { name: "//evil.com unquoted", part: "//evil.com" },
    { name: "/\\evil.com", part: q("/\\evil.com") },
    { name: "/%5Cevil.com", part: "/%5Cevil.com" },
    { name: "\\/evil.com", part: q("\\/evil.com") },
    { name: "\\\\evil.com", part: q("\\\\evil.com") },
    { name: "/<TAB>/evil.com", part: q("/\t/evil.com") },
    { name: "/%09/evil.com (a tab after one unquote)", part: "/%09/evil.com" },
    { name: "/%09/evil.com (what is left after one unquote)", part: q("/%09/evil.com"), location: "/%09/evil.com" },
    { name: "/ /evil.com", part: q("/ /evil.com") },
    { name: "/<U+3000>/evil.com", part: q("/\u3000/evil.com") },
    { name: "/./\\evil.com", part: q("/./\\evil.com") },
    { name: "/../..//evil.com", part: q("/../..//evil.com") },
    { name: "////evil.com", part: q("////evil.com") },
    { name: "https://evil.com", part: q("https://evil.com") },
    { name: "http:evil.com", part: q("http:evil.com") },
    { name: "javascript:alert(1)", part: q("javascript:alert(1)") },
    { name: "%2F%2Fevil.com (double-quoted)", part: q(q("//evil.com")) },
    { name: "%2F%2Fevil.com (quoted once)", part: "%2F%2Fevil.com" },
    { name: "evil.com/x (no leading slash)", part: q("evil.com/x") },
    { name: " //evil.com (leading space)", part: q(" //evil.com") },
    { name: "CR LF Set-Cookie", part: "/%0d%0aSet-Cookie:%20sso=x" },
    { name: "CR LF Set-Cookie, quoted twice", part: q("/%0d%0aSet-Cookie:%20sso=x"), location: "/%0d%0aSet-Cookie:%20sso=x" },
  ];

  it.each(cases)("state <csrf>:$name: the login completes, and the browser lands on this origin", async ({ name, part, location }) => {
    const login = await loginUntilCallback();
    const res = await nothingForwarded(() => callCallback({ code: login.code, state: `${login.csrf}:${part}` }, `sso_csrf=${login.csrf}`), name);
    expect(res.status, name).toBe(302);
    const got = res.headers.get("location")!;
    expect(got, name).toBe(location ?? "/");
    expectSameOriginPath(got, name);
    // Nothing injected: one sso cookie, the provider's token.
    const sso = setCookies(res).filter((c) => c.name === "sso");
    expect(sso, name).toHaveLength(1);
    expect(decodeJwt(sso[0]!.value).email, name).toBe(alice);
    expect(res.headers.getSetCookie().join("\n"), name).not.toMatch(/sso=x/);
  });
});

describe("open redirect through logout's rd", () => {
  // The same strings as the state's, as the browser's query carries them (decoded once by the query).
  const rds = ["//evil.com", "/\\evil.com", "\\/evil.com", "/\t/evil.com", "/ /evil.com", "/./\\evil.com", "/../..//evil.com", "https://evil.com", "http:evil.com", "javascript:alert(1)", "%2F%2Fevil.com", "evil.com/x", "/\r\nSet-Cookie: sso=x"];
  it.each(rds)("rd=%j lands on /", async (rd) => {
    const res = await nothingForwarded(() => fetch(`${h.url}/_sso/logout?${new URLSearchParams({ rd })}`, { redirect: "manual" }), rd);
    expect(res.status, rd).toBe(302);
    expect(res.headers.get("location"), rd).toBe("/");
    expect(res.headers.getSetCookie().join("\n"), rd).not.toMatch(/sso=x/);
  });
});

describe("the state's shape", () => {
  // Cases whose csrf value is good: the login completes, and only the return path is in question.
  const completing: { name: string; state: (csrf: string) => string; location?: string }[] = [
    { name: "no ':' at all (no return path)", state: (c) => c },
    { name: "several ':' (split on the first only)", state: (c) => `${c}:/app/x:y:z`, location: "/app/x:y:z" },
    { name: "several ':', the path quoted", state: (c) => `${c}:${encodeURIComponent("/app/a:b")}:c`, location: "/app/a:b:c" },
    { name: "a return path over 4096 characters", state: (c) => `${c}:${encodeURIComponent(`/app/${"a".repeat(5000)}`)}` },
    { name: "not UTF-8 after the unquote (%ff%fe)", state: (c) => `${c}:/app/%ff%fe` },
    { name: "a lone %", state: (c) => `${c}:/app/%` },
  ];
  it.each(completing)("$name", async ({ name, state, location }) => {
    const login = await loginUntilCallback();
    const res = await nothingForwarded(() => callCallback({ code: login.code, state: state(login.csrf) }, `sso_csrf=${login.csrf}`), name);
    expect(res.status, name).toBe(302);
    expect(res.headers.get("location"), name).toBe(location ?? "/");
    expect(ssoSet(res), name).toBeDefined();
  });

  it("bytes that are not UTF-8 in the query itself: a same-origin path", async () => {
    const login = await loginUntilCallback();
    const res = await callCallback(`code=${encodeURIComponent(login.code)}&state=${login.csrf}%3A%2Fapp%2F%FF%FE`, `sso_csrf=${login.csrf}`);
    expect(res.status).toBe(302);
    expectSameOriginPath(res.headers.get("location")!, "%FF%FE");
  });

  // Cases refused before the code is tried: no token request, no session.
  const refused: { name: string; state?: (csrf: string) => string; cookie: (csrf: string) => string }[] = [
    { name: "empty csrf part, a good csrf cookie", state: () => ":/app", cookie: (c) => `sso_csrf=${c}` },
    { name: "empty csrf part, an empty csrf cookie", state: () => ":/app", cookie: () => "sso_csrf=" },
    { name: "empty state", state: () => "", cookie: () => "sso_csrf=" },
    { name: "no state parameter", cookie: (c) => `sso_csrf=${c}` },
    { name: "an oversized csrf part equal to the cookie", state: () => `${"A".repeat(5000)}:/app`, cookie: () => `sso_csrf=${"A".repeat(5000)}` },
  ];
  it.each(refused)("$name: 403, the code is not tried", async ({ name, state, cookie }) => {
    const login = await loginUntilCallback();
    const tokens = hits("/token");
    const query: Record<string, string> = { code: login.code };
    if (state) query.state = state(login.csrf);
    const res = await nothingForwarded(() => callCallback(query, cookie(login.csrf)), name);
    await expectDeadEnd(res, 403, name);
    expect(hits("/token"), name).toBe(tokens);
  });

  it("a state too big for a request line is refused by the server, not tried", async () => {
    const login = await loginUntilCallback();
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code: login.code, state: `${login.csrf}:${"/a".repeat(12_000)}` }, `sso_csrf=${login.csrf}`));
    expect(res.status).toBe(431);
    expect(hits("/token")).toBe(tokens);
  });
});

describe("the provider's answers", () => {
  it("error=access_denied from a real login: a 403 page naming it, one trip to the provider, no loop", async () => {
    const jar = new CookieJar();
    const r = await nothingForwarded(() => browse(jar, `${h.url}/app/denied`, { login: { sub: "alice", deny: true } }));
    expect(r.hops.filter((hop) => hop.url.includes("/auth?")).length).toBe(1);
    expect(r.finalUrl.startsWith(`${h.url}${callbackPath}?`)).toBe(true);
    expect(new URL(r.finalUrl).searchParams.get("error")).toBe("access_denied");
    await expectDeadEnd(r.final, 403, "access_denied", "access_denied", true);
    expect(jar.get(h.url, "sso")).toBeUndefined();
    // The csrf value is spent and its cookie cleared.
    expect(jar.get(h.url, "sso_csrf")).toBeUndefined();
  });

  const errors: { name: string; query: (l: Login) => Record<string, string>; cookie: (l: Login) => string | undefined; status: number; mention?: string; spent: boolean }[] = [
    { name: "error=access_denied, the login's csrf", query: (l) => ({ error: "access_denied", state: `${l.csrf}:/app` }), cookie: (l) => `sso_csrf=${l.csrf}`, status: 403, mention: "access_denied", spent: true },
    { name: "error=access_denied without a csrf cookie", query: (l) => ({ error: "access_denied", state: `${l.csrf}:/app` }), cookie: () => undefined, status: 403, spent: false },
    { name: "error=<script> (escaped in the page)", query: (l) => ({ error: "<script>alert(1)</script>", state: `${l.csrf}:/app` }), cookie: (l) => `sso_csrf=${l.csrf}`, status: 403, mention: "&#60;script&#62;", spent: true },
    { name: "no code", query: (l) => ({ state: `${l.csrf}:/app` }), cookie: (l) => `sso_csrf=${l.csrf}`, status: 400, spent: true },
    { name: "an empty code", query: (l) => ({ code: "", state: `${l.csrf}:/app` }), cookie: (l) => `sso_csrf=${l.csrf}`, status: 400, spent: true },
  ];
  it.each(errors)("$name: a $status page, no token request", async ({ name, query, cookie, status, mention, spent }) => {
    const login = await loginUntilCallback();
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback(query(login), cookie(login)), name);
    await expectDeadEnd(res, status, name, mention, spent);
    expect(await (await callCallback(query(login), cookie(login))).text()).not.toContain("<script>");
    expect(hits("/token"), name).toBe(tokens);
  });

  it("a code already redeemed: the token endpoint refuses it, a 403 page, no session", async () => {
    const login = await loginUntilCallback();
    // Someone (the attacker who read the code off a log) redeems it first, with the right verifier.
    const stolen = await fetch(h.oidc.endpoints.token, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: login.code,
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uri: `${h.url}${callbackPath}`,
        code_verifier: h.csrf.pkce(login.csrf).verifier,
      }),
    });
    expect(stolen.status).toBe(200);
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code: login.code, state: `${login.csrf}:/app/x` }, `sso_csrf=${login.csrf}`));
    await expectDeadEnd(res, 403, "redeemed code", "refused the code", true);
    expect(hits("/token")).toBe(tokens + 1);
  });

  it("a code the proxy already redeemed, brought back with a new login's csrf: 403, no session", async () => {
    const first = await loginUntilCallback();
    const ok = await callCallback({ code: first.code, state: `${first.csrf}:/app` }, `sso_csrf=${first.csrf}`);
    expect(ok.status).toBe(302);
    const second = await loginUntilCallback();
    const res = await nothingForwarded(() => callCallback({ code: first.code, state: `${second.csrf}:/app` }, `sso_csrf=${second.csrf}`));
    await expectDeadEnd(res, 403, "reused code", undefined, true);
  });
});

describe("csrf and login CSRF", () => {
  const tamper = (csrf: string) => `${csrf[0] === "A" ? "B" : "A"}${csrf.slice(1)}`;
  const lookalike = `AAAAAAAAAAAAAAAAAAAAAA.${Date.now().toString(36)}.AAAA`;
  // The attacker holds a real code (their own login, say) and controls the state; the cookie is
  // what the victim's browser has, or what the attacker planted in it.
  const refused: { name: string; state: (own: string, other: string) => string; cookie: (own: string, other: string) => string | undefined; mention: string }[] = [
    { name: "no csrf cookie", state: (own) => `${own}:/app`, cookie: () => undefined, mention: "missing" },
    { name: "another login's csrf cookie", state: (own) => `${own}:/app`, cookie: (_own, other) => `sso_csrf=${other}`, mention: "does not match" },
    { name: "a planted cookie never issued, equal to the state's csrf", state: () => "attacker:/app", cookie: () => "sso_csrf=attacker", mention: "not one this proxy issued" },
    { name: "a planted cookie shaped like ours (random.time.mac)", state: () => `${lookalike}:/app`, cookie: () => `sso_csrf=${lookalike}`, mention: "not one this proxy issued" },
    { name: "a real csrf value with one character changed, in cookie and state", state: (own) => `${tamper(own)}:/app`, cookie: (own) => `sso_csrf=${tamper(own)}`, mention: "not one this proxy issued" },
    { name: "a csrf value one character shorter than the cookie", state: (own) => `${own.slice(0, -1)}:/app`, cookie: (own) => `sso_csrf=${own}`, mention: "does not match" },
  ];
  it.each(refused)("$name: 403 page, the code is not tried", async ({ name, state, cookie, mention }) => {
    const own = await loginUntilCallback();
    const other = await loginUntilCallback();
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code: own.code, state: state(own.csrf, other.csrf) }, cookie(own.csrf, other.csrf)), name);
    await expectDeadEnd(res, 403, name, mention);
    expect(hits("/token"), name).toBe(tokens);
  });

  it("a csrf value older than 15 minutes: 403, the code is not tried", async () => {
    const login = await loginUntilCallback();
    // The harness's signer's secret, to sign a value dated 16 minutes ago as the proxy would have.
    const secret = (h.csrf as unknown as { secret: Buffer }).secret;
    const old = new CsrfSigner(secret, () => Date.now() - 16 * 60_000).issue();
    expect(h.csrf.check(old)).toEqual({ ok: false, reason: "expired" });
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code: login.code, state: `${old}:/app` }, `sso_csrf=${old}`));
    await expectDeadEnd(res, 403, "expired csrf", "too old");
    expect(hits("/token")).toBe(tokens);
  });

  it("replaying a completed callback URL: 403 without a session, 302 with one, no second exchange", async () => {
    const login = await loginUntilCallback("/app/replayed");
    const query = { code: login.code, state: `${login.csrf}:/app/replayed` };
    const first = await callCallback(query, `sso_csrf=${login.csrf}`);
    expect(first.status).toBe(302);
    // Used once: the browser is told to forget it.
    expect(setCookies(first).find((c) => c.name === "sso_csrf")?.attrs.get("max-age")).toBe("0");
    const sso = ssoSet(first)!.value;
    const tokens = hits("/token");
    const again = await nothingForwarded(() => callCallback(query, `sso_csrf=${login.csrf}`));
    await expectDeadEnd(again, 403, "replay without a session", "already used");
    // The second tab of two parallel logins: this browser is logged in already.
    const tab = await nothingForwarded(() => callCallback(query, `sso_csrf=${login.csrf}; sso=${sso}`));
    expect(tab.status).toBe(302);
    expect(tab.headers.get("location")).toBe("/app/replayed");
    expect(ssoSet(tab)).toBeUndefined();
    // A planted sso cookie does not turn the replay into a redirect.
    const forged = await callCallback(query, `sso_csrf=${login.csrf}; sso=${aliceSso.slice(0, -4)}AAAA`);
    await expectDeadEnd(forged, 403, "replay with a forged session");
    expect(hits("/token")).toBe(tokens);
  });

  // Two csrf cookies of the same name (a stale one from a parent domain first): the login works.
  const stale: { name: string; stale: () => Promise<string> }[] = [
    {
      name: "a used value",
      stale: async () => {
        const l = await loginUntilCallback();
        expect((await callCallback({ code: l.code, state: `${l.csrf}:/` }, `sso_csrf=${l.csrf}`)).status).toBe(302);
        return l.csrf;
      },
    },
    { name: "a value never issued", stale: async () => "stale-from-parent-domain" },
    { name: "an empty value", stale: async () => "" },
  ];
  it.each(stale)("a stale csrf cookie first ($name) does not lock the user out", async ({ name, stale: make }) => {
    const old = await make();
    // The login redirect does not adopt the stale value.
    const start = await fetch(`${h.url}/app/stale`, { redirect: "manual", headers: { cookie: `sso_csrf=${old}` } });
    expect(new URL(start.headers.get("location")!).searchParams.get("state")!.startsWith(`${old}:`), name).toBe(false);
    // The whole flow with the stale cookie sent first on every request, as the browser would.
    const jar = new CookieJar();
    const path = `/app/stale-${stale.findIndex((s) => s.name === name)}`;
    const { out: r, rec } = await forwardedOnce(() => browse(jar, `${h.url}${path}`, { login: { sub: "alice" }, headers: { cookie: `sso_csrf=${old}` } }), name);
    expect(r.final.status, `${name}: ${JSON.stringify(r.hops)}`).toBe(200);
    expect(rec.url).toBe(path);
    expect(headerValuesAnySpelling(rec, "remote-user")).toEqual([alice]);
  });
});

describe("token substitution (nonce)", () => {
  it("a code obtained for another login (its csrf, nonce and PKCE) fails with that login's csrf: no session", async () => {
    const a = await loginUntilCallback("/app/a");
    const b = await loginUntilCallback("/app/b");
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code: a.code, state: `${b.csrf}:/app/b` }, `sso_csrf=${b.csrf}`));
    // The provider refuses B's verifier for A's code (403) before the nonce is even looked at.
    await expectDeadEnd(res, 403, "A's code with B's csrf", undefined, true);
    expect(hits("/token")).toBe(tokens + 1);
  });

  it("an ID token carrying another nonce is refused after the exchange: 403 nonce page, no session", async () => {
    const start = await fetch(`${h.url}/app/nonce`, { redirect: "manual" });
    const csrf = setCookies(start).find((c) => c.name === "sso_csrf")!.value;
    // This login's PKCE challenge, but the nonce of some other login.
    const auth = new URL(start.headers.get("location")!);
    auth.searchParams.set("nonce", "nonce-of-another-login");
    idpJar.delete(h.url, "sso_csrf");
    const r = await browse(idpJar, auth.href, { login: { sub: "alice" }, stopAt: (u) => u.origin === h.url && u.pathname === callbackPath });
    const code = new URL(r.finalUrl).searchParams.get("code")!;
    expect(code).toBeTruthy();
    const tokens = hits("/token");
    const res = await nothingForwarded(() => callCallback({ code, state: `${csrf}:/app/nonce` }, `sso_csrf=${csrf}`));
    await expectDeadEnd(res, 403, "foreign nonce", "nonce", true);
    expect(hits("/token")).toBe(tokens + 1);
  });
});

// ---------------------------------------------------------------------------------------------

describe("identity header spoofing", () => {
  // Header sets a client sends; none of them may reach the upstream.
  const spoofs: { name: string; headers: ([string, string] | string)[] }[] = [
    { name: "REMOTE-USER", headers: [["REMOTE-USER", "admin"]] },
    { name: "Remote-User", headers: [["Remote-User", "admin"]] },
    { name: "remote-user", headers: [["remote-user", "admin"]] },
    { name: "REMOTE_USER", headers: [["REMOTE_USER", "admin"]] },
    { name: "Remote_User", headers: [["Remote_User", "admin"]] },
    { name: "remote_user", headers: [["remote_user", "admin"]] },
    { name: "USER-GROUPS", headers: [["USER-GROUPS", "admins"]] },
    { name: "User-Groups", headers: [["User-Groups", "admins"]] },
    { name: "USER_GROUPS", headers: [["USER_GROUPS", "admins"]] },
    { name: "duplicates", headers: [["REMOTE-USER", "admin"], ["REMOTE-USER", "root"], ["Remote-User", "admin2"], ["USER-GROUPS", "admins"], ["USER-GROUPS", "wheel"]] },
    { name: "folded into one line", headers: [["REMOTE-USER", `attacker, ${alice}`], ["USER-GROUPS", "admins, wheel"]] },
    { name: "empty values", headers: [["REMOTE-USER", ""], ["USER_GROUPS", ""]] },
    { name: "every spelling at once", headers: [["REMOTE-USER", "a"], ["Remote-User", "b"], ["remote-user", "c"], ["REMOTE_USER", "d"], ["Remote_User", "e"], ["USER-GROUPS", "f"], ["USER_GROUPS", "g"], ["user_groups", "h"]] },
  ];
  const where: { name: string; path: string; cookie: boolean; user: string[]; groups: string[] }[] = [
    { name: "auth_type none (/public/)", path: "/public/spoof", cookie: false, user: [], groups: [] },
    { name: "auth_type none (= /health)", path: "/health", cookie: false, user: [], groups: [] },
    { name: "no location at all", path: "/elsewhere/spoof", cookie: false, user: [], groups: [] },
    { name: "an unprotected location, with a session", path: "/public/spoof-session", cookie: true, user: [], groups: [] },
    { name: "protected (/app)", path: "/app/spoof", cookie: true, user: [alice], groups: [] },
    { name: "protected with groups (/team)", path: "/team/spoof", cookie: true, user: [alice], groups: ["dev,ops"] },
  ];
  const table = spoofs.flatMap((s) => where.map((w) => ({ ...w, spoof: s.name, headers: s.headers })));

  it.each(table)("$spoof on $name", async ({ spoof, name, path, cookie, headers, user, groups }) => {
    const what = `${spoof} on ${name}`;
    const { out: res, rec } = await forwardedOnce(() => rawRequest("GET", path, [...headers, ...(cookie ? [["Cookie", `sso=${aliceSso}`] as [string, string]] : [])]), what);
    expect(res.status, what).toBe(200);
    expect(rec.url, what).toBe(path);
    expect(headerValuesAnySpelling(rec, "remote-user"), what).toEqual(user);
    expect(headerValuesAnySpelling(rec, "user-groups"), what).toEqual(groups);
  });

  const refusedByServer: { name: string; line: string }[] = [
    { name: "obs-fold continuation line", line: "REMOTE-USER: admin\r\n continued" },
    { name: "whitespace before the colon", line: "REMOTE-USER : admin" },
  ];
  it.each(refusedByServer)("$name: the server answers 400, nothing forwarded", async ({ name, line }) => {
    const res = await nothingForwarded(() => rawRequest("GET", "/public/malformed", [line]), name);
    expect(res.status, name).toBe(400);
  });

  it("Connection naming the identity headers (and X-Forwarded-For) removes none of the proxy's", async () => {
    const { rec } = await forwardedOnce(() =>
      rawRequest("GET", "/team/connection", [["Connection", "close, REMOTE-USER, USER-GROUPS, X-Forwarded-For"], ["REMOTE-USER", "admin"], ["Cookie", `sso=${aliceSso}`]]),
    );
    expect(headerValuesAnySpelling(rec, "remote-user")).toEqual([alice]);
    expect(headerValuesAnySpelling(rec, "user-groups")).toEqual(["dev,ops"]);
    expect(headerValues(rec, "x-forwarded-for")).toEqual(["127.0.0.1"]);
    expect(headerValues(rec, "connection")).not.toContain("close, REMOTE-USER, USER-GROUPS, X-Forwarded-For");
  });

  const rewrites: [string, string][] = [
    ["X-Forwarded-Uri", "/public/x"],
    ["X-Original-URI", "/public/x"],
    ["X-Original-URL", "/public/x"],
    ["X-Rewrite-URL", "/public/x"],
    ["X-Forwarded-Prefix", "/public"],
    ["X-Forwarded-Path", "/public/x"],
  ];
  it.each(rewrites)("%s: %s on a protected path changes nothing: login without a session, the real path with one", async (name, value) => {
    const res = await nothingForwarded(() => rawRequest("GET", "/app/rewritten", [[name, value]]), name);
    expectLoginRedirect(res.status, values(res, "location")[0], name);
    const { rec } = await forwardedOnce(() => rawRequest("GET", "/app/rewritten", [[name, value], ["Cookie", `sso=${aliceSso}`]]), name);
    expect(rec.url).toBe("/app/rewritten");
    expect(headerValuesAnySpelling(rec, name)).toEqual([]);
    // And the other way round: a public path naming a protected one is served as the public path, anonymously.
    const { rec: pub } = await forwardedOnce(() => rawRequest("GET", "/public/rewritten", [[name, "/admin"]]), name);
    expect(pub.url).toBe("/public/rewritten");
    expect(headerValuesAnySpelling(pub, "remote-user")).toEqual([]);
    expect(headerValuesAnySpelling(pub, name)).toEqual([]);
  });

  it("X-Forwarded-For/-Proto/-Host, Forwarded and X-Real-IP from the client are replaced or dropped", async () => {
    const spoofed: [string, string][] = [
      ["X-Forwarded-For", "6.6.6.6"],
      ["X_Forwarded_For", "6.6.6.7"],
      ["X-Forwarded-Proto", "https"],
      ["X-Forwarded-Host", "evil.example"],
      ["Forwarded", "for=6.6.6.6;proto=https;host=evil.example"],
      ["X-Real-IP", "6.6.6.6"],
    ];
    const { rec } = await forwardedOnce(() => rawRequest("GET", "/app/xff", [...spoofed, ["Cookie", `sso=${aliceSso}`]]));
    expect(headerValuesAnySpelling(rec, "x-forwarded-for")).toEqual(["127.0.0.1"]);
    expect(headerValuesAnySpelling(rec, "x-forwarded-proto")).toEqual(["http"]);
    expect(headerValuesAnySpelling(rec, "x-forwarded-host")).toEqual([`127.0.0.1:${h.port}`]);
    expect(headerValues(rec, "forwarded")).toEqual([]);
    expect(headerValues(rec, "x-real-ip")).toEqual([]);
    // Without -trust-forwarded they do not steer the login either: redirect_uri and cookies stay plain http on the real host.
    const login = await nothingForwarded(() => rawRequest("GET", "/app/xff", spoofed));
    expectLoginRedirect(login.status, values(login, "location")[0], "spoofed forwarding headers");
    expect(new URL(values(login, "location")[0]!).searchParams.get("redirect_uri")).toBe(`${h.url}${callbackPath}`);
    expect(values(login, "set-cookie").map(parseSetCookie).every((c) => !c.attrs.has("secure"))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------

describe("forged and broken ID tokens in the sso cookie", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64url");
  let foreign: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
  let foreignJwk: JWK;
  let realKid: string;
  let pem: string;
  let jwksJson: string;

  beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    foreign = pair.privateKey;
    foreignJwk = await exportJWK(pair.publicKey);
    foreignJwk.kid = await calculateJwkThumbprint(foreignJwk);
    const real = h.idp.signingKeys[0]!;
    realKid = real.kid!;
    pem = createPublicKey({ key: { kty: real.kty!, n: real.n!, e: real.e! }, format: "jwk" }).export({ type: "spki", format: "pem" }).toString();
    const jwks = (await (await fetch(h.oidc.endpoints.jwks)).json()) as { keys: JWK[] };
    jwksJson = JSON.stringify(jwks.keys.find((k) => k.kid === realKid));
  });

  const claims = (over: JWTPayload = {}, drop: string[] = []): JWTPayload => {
    const c: JWTPayload = { iss: h.idp.issuer, aud: clientId, sub: "alice", email: alice, email_verified: true, scope: "openid password", iat: now(), exp: now() + 300, ...over };
    for (const k of drop) delete c[k];
    return c;
  };
  const signForeign = (c: JWTPayload, header: Partial<JWTHeaderParameters> = {}) => new SignJWT(c).setProtectedHeader({ alg: "RS256", typ: "JWT", ...header }).sign(foreign);
  const signHmac = (c: JWTPayload, secret: string) => new SignJWT(c).setProtectedHeader({ alg: "HS256", typ: "JWT", kid: realKid }).sign(new TextEncoder().encode(secret));
  const real = (c: JWTPayload) => h.idp.signToken(c);

  it("control: the same claims signed by the provider's key pass", async () => {
    const token = await real(claims());
    const { out: res, rec } = await forwardedOnce(() => fetch(`${h.url}/app/jwt-control`, { headers: { cookie: `sso=${token}` } }));
    expect(res.status).toBe(200);
    expect(headerValues(rec, "remote-user")).toEqual([alice]);
  });

  const tokens: { name: string; token: () => Promise<string> }[] = [
    { name: "alg none, empty signature", token: async () => new UnsecuredJWT(claims()).encode() },
    { name: "alg none, the real kid", token: async () => `${b64(JSON.stringify({ alg: "none", kid: realKid, typ: "JWT" }))}.${b64(JSON.stringify(claims()))}.` },
    { name: "alg NONE (case variant)", token: async () => `${b64(JSON.stringify({ alg: "NONE", typ: "JWT" }))}.${b64(JSON.stringify(claims()))}.` },
    { name: "HS256 keyed with the provider's public key as PEM", token: () => signHmac(claims(), pem) },
    { name: "HS256 keyed with the provider's public JWK as JSON", token: () => signHmac(claims(), jwksJson) },
    { name: "RS256 by a foreign key under the real kid", token: () => signForeign(claims(), { kid: realKid }) },
    { name: "RS256 by a foreign key, no kid", token: () => signForeign(claims()) },
    { name: "RS256 by a foreign key, an unknown kid", token: () => signForeign(claims(), { kid: "unknown-kid" }) },
    { name: "jku pointing at the attacker's JWKS", token: () => signForeign(claims(), { kid: foreignJwk.kid!, jku: `${h.upstream.url}/attacker/jku.json` }) },
    { name: "x5u pointing at the attacker's certificate", token: () => signForeign(claims(), { kid: foreignJwk.kid!, x5u: `${h.upstream.url}/attacker/x5u.pem` }) },
    { name: "the attacker's key embedded as jwk", token: () => signForeign(claims(), { jwk: { kty: foreignJwk.kty!, n: foreignJwk.n!, e: foreignJwk.e! } }) },
    { name: "a real token's signature on other claims", token: async () => { const t = (await real(claims())).split("."); return `${t[0]}.${b64(JSON.stringify(claims({ email: "admin@example.com" })))}.${t[2]}`; } },
    { name: "exp an hour past", token: () => real(claims({ iat: now() - 7200, exp: now() - 3600 })) },
    { name: "exp 10 s past (beyond the 5 s leeway)", token: () => real(claims({ iat: now() - 300, exp: now() - 10 })) },
    { name: "nbf in the future", token: () => real(claims({ nbf: now() + 60 })) },
    { name: "iat in the future", token: () => real(claims({ iat: now() + 60, exp: now() + 360 })) },
    { name: "no exp", token: () => real(claims({}, ["exp"])) },
    { name: "exp not a number", token: () => real(claims({ exp: String(now() + 300) as unknown as number })) },
    { name: "another issuer", token: () => real(claims({ iss: "http://127.0.0.1:1" })) },
    { name: "the issuer with a trailing slash", token: () => real(claims({ iss: `${h.idp.issuer}/` })) },
    { name: "no iss", token: () => real(claims({}, ["iss"])) },
    { name: "aud another client", token: () => real(claims({ aud: "other-client" })) },
    { name: "aud an array without us", token: () => real(claims({ aud: ["other-client", "third"] })) },
    { name: "several audiences, azp another client", token: () => real(claims({ aud: [clientId, "other-client"], azp: "other-client" })) },
    { name: "several audiences, no azp", token: () => real(claims({ aud: [clientId, "other-client"] })) },
    { name: "no aud", token: () => real(claims({}, ["aud"])) },
    { name: "email_verified false", token: () => real(claims({ email_verified: false })) },
    { name: "no email", token: () => real(claims({}, ["email"])) },
    { name: "email not a string", token: () => real(claims({ email: ["alice@example.com"] })) },
    { name: "email with CR LF", token: () => real(claims({ email: "alice@example.com\r\nREMOTE-USER: admin" })) },
    { name: "malformed base64 in the payload", token: async () => { const t = (await real(claims())).split("."); return `${t[0]}.${t[1]!.slice(0, 10)}!*!${t[1]!.slice(10)}.${t[2]}`; } },
    { name: "a header that is not JSON", token: async () => { const t = (await real(claims())).split("."); return `${b64("not json")}.${t[1]}.${t[2]}`; } },
    { name: "two segments", token: async () => (await real(claims())).split(".").slice(0, 2).join(".") },
    { name: "four segments", token: async () => `${await real(claims())}.x` },
    { name: "five segments (JWE shape)", token: async () => `${await real(claims())}.x.y` },
    { name: "a huge token (14 KB)", token: () => signForeign(claims({ pad: "x".repeat(10_000) }), { kid: realKid }) },
    { name: "an empty value", token: async () => "" },
    { name: "garbage", token: async () => "garbage" },
  ];

  it.each(tokens)("$name: login redirect, the cookie cleared, nothing forwarded", async ({ name, token }) => {
    const t = await token();
    const path = `/app/jwt-${tokens.findIndex((x) => x.name === name)}`;
    const res = await nothingForwarded(() => fetch(`${h.url}${path}`, { redirect: "manual", headers: { cookie: `sso=${t}` } }), name);
    expectLoginRedirect(res.status, res.headers.get("location"), name);
    const cleared = setCookies(res).find((c) => c.name === "sso");
    expect(cleared, `${name}: the sso cookie must be cleared`).toBeDefined();
    expect(cleared!.value, name).toBe("");
    expect(cleared!.attrs.get("max-age"), name).toBe("0");
    // jku/x5u were never fetched.
    expect(h.upstream.requests.filter((r) => r.url.startsWith("/attacker/")), name).toEqual([]);
  });

  it("a token too big for the server's header limit is refused before anything else", async () => {
    const t = await signForeign(claims({ pad: "x".repeat(20_000) }), { kid: realKid });
    const res = await nothingForwarded(() => fetch(`${h.url}/app/jwt-huge`, { redirect: "manual", headers: { cookie: `sso=${t}` } }));
    expect(res.status).toBe(431);
  });

  it("unknown key ids: a storm of them refetches the JWKS once at most (cool-down)", async () => {
    const before = hits("/jwks");
    const storm = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const t = await signForeign(claims(), { kid: `storm-${i}` });
        return fetch(`${h.url}/app/storm-${i}`, { redirect: "manual", headers: { cookie: `sso=${t}` } });
      }),
    );
    for (const r of storm) expect(r.status).toBe(302);
    for (let i = 0; i < 10; i++) {
      const t = await signForeign(claims(), { kid: `storm-seq-${i}` });
      expect((await fetch(`${h.url}/app/storm-seq`, { redirect: "manual", headers: { cookie: `sso=${t}` } })).status).toBe(302);
    }
    expect(hits("/jwks") - before).toBeLessThanOrEqual(1);
    expect(h.upstream.requests.some((r) => r.url.startsWith("/app/storm"))).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------

describe("cookies", () => {
  it("the csrf and sso cookies: HttpOnly, Path=/, no Domain, never SameSite=Strict, Max-Age within the token's life", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/app/cookies`, { login: { sub: "alice" } });
    expect(r.final.status).toBe(200);
    const csrf = r.hops[0]!.setCookie.map(parseSetCookie).find((c) => c.name === "sso_csrf")!;
    const callback = r.hops.find((hop) => hop.url.startsWith(`${h.url}${callbackPath}`))!;
    const sso = callback.setCookie.map(parseSetCookie).find((c) => c.name === "sso")!;
    for (const [name, c] of [["csrf", csrf], ["sso", sso]] as const) {
      expect(c.attrs.has("httponly"), name).toBe(true);
      expect(c.attrs.get("path"), name).toBe("/");
      expect(c.attrs.has("domain"), name).toBe(false);
      // The provider -> /_sso/ hop is a cross-site top-level GET: a Strict cookie would be withheld on it.
      expect(c.attrs.get("samesite")?.toLowerCase(), name).not.toBe("strict");
      // Plain http here: Secure would make the browser drop the cookie.
      expect(c.attrs.has("secure"), name).toBe(false);
    }
    const { exp } = decodeJwt(sso.value);
    const maxAge = Number(sso.attrs.get("max-age"));
    expect(maxAge).toBeGreaterThan(0);
    expect(maxAge).toBeLessThanOrEqual(exp! - now() + 1);
  });

  it("served for https (redirect_uri https://): the cookies carry Secure; SameSite=Lax", async () => {
    // The harness writes extraConfig right below oauth2_client's secret; indented, this line belongs to that block.
    const s = await startProxyHarness({ extraConfig: "  redirect_uri: https://app.example.com/_sso/\n" });
    try {
      const res = await fetch(`${s.url}/app/secure`, { redirect: "manual", headers: { cookie: "sso=bad" } });
      expectLoginRedirect(res.status, res.headers.get("location"), "https", s);
      expect(new URL(res.headers.get("location")!).searchParams.get("redirect_uri")).toBe("https://app.example.com/_sso/");
      const cookies = setCookies(res);
      expect(cookies.map((c) => c.name).sort()).toEqual(["sso", "sso_csrf"]);
      for (const c of cookies) {
        expect(c.attrs.has("secure"), c.name).toBe(true);
        expect(c.attrs.get("samesite"), c.name).toBe("Lax");
        expect(c.attrs.has("httponly"), c.name).toBe(true);
      }
      expect(s.upstream.requests).toEqual([]);
    } finally {
      await s.stop();
    }
  });

  it("an ID token too big for a cookie (hundreds of groups): a 500 page naming the size, no cookie, no loop", async () => {
    accounts.big = { email: "big@example.com", groups: Array.from({ length: 300 }, (_, i) => `a-rather-long-group-name-${i}`) };
    try {
      const jar = new CookieJar();
      const r = await nothingForwarded(() => browse(jar, `${h.url}/app/big`, { login: { sub: "big" } }));
      expect(r.hops.filter((hop) => hop.url.includes("/auth?")).length).toBe(1);
      await expectDeadEnd(r.final, 500, "big token", "bytes", true);
      expect(jar.get(h.url, "sso")).toBeUndefined();
    } finally {
      delete accounts.big;
    }
  });

  const stripping: { name: string; path: string; cookies: () => ([string, string] | string)[]; want: string[]; user: string[] }[] = [
    { name: "protected location", path: "/app/cookies-strip", cookies: () => [["Cookie", `a=1; sso=${aliceSso}; sso_csrf=x; b=2`]], want: ["a=1; b=2"], user: [alice] },
    { name: "unprotected location", path: "/public/cookies-strip", cookies: () => [["Cookie", `sso=${aliceSso}; a=1; sso_csrf=x`]], want: ["a=1"], user: [] },
    { name: "two Cookie headers", path: "/app/cookies-two", cookies: () => [["Cookie", "a=1"], ["Cookie", `sso=${aliceSso}; sso_csrf=y`]], want: ["a=1"], user: [alice] },
    { name: "only the proxy's cookies", path: "/app/cookies-only", cookies: () => [["Cookie", `sso=${aliceSso}; sso_csrf=z`]], want: [], user: [alice] },
    { name: "look-alike names pass", path: "/app/cookies-alike", cookies: () => [["Cookie", `sso=${aliceSso}; sso2=k; xsso=k; SSO=k`]], want: ["sso2=k; xsso=k; SSO=k"], user: [alice] },
  ];
  it.each(stripping)("the proxy's cookies do not reach the upstream: $name", async ({ name, path, cookies, want, user }) => {
    const { rec } = await forwardedOnce(() => rawRequest("GET", path, cookies()), name);
    expect(headerValues(rec, "cookie"), name).toEqual(want);
    expect(headerValues(rec, "remote-user"), name).toEqual(user);
  });

  const duplicates: { name: string; cookie: (bad: string, expired: string) => string }[] = [
    { name: "a forged one first", cookie: (bad) => `sso=${bad}; sso=${aliceSso}` },
    { name: "an expired one first", cookie: (_bad, expired) => `sso=${expired}; sso=${aliceSso}` },
    { name: "the valid one first", cookie: (bad) => `sso=${aliceSso}; sso=${bad}` },
    { name: "an empty one first", cookie: () => `sso=; sso=${aliceSso}` },
  ];
  it.each(duplicates)("duplicate sso cookies, $name: the valid one wins", async ({ name, cookie }) => {
    const expired = await h.idp.signToken({ iss: h.idp.issuer, aud: clientId, sub: "alice", email: alice, scope: "openid password sms", iat: now() - 600, exp: now() - 300 });
    const { out: res, rec } = await forwardedOnce(() => fetch(`${h.url}/team/dup`, { headers: { cookie: cookie(`${aliceSso.slice(0, -6)}AAAAAA`, expired) } }), name);
    expect(res.status, name).toBe(200);
    expect(headerValues(rec, "remote-user"), name).toEqual([alice]);
    expect(headerValues(rec, "user-groups"), name).toEqual(["dev,ops"]);
  });

  it("only bad sso cookies: login, and the cookie cleared", async () => {
    const res = await nothingForwarded(() => fetch(`${h.url}/app/dup-bad`, { redirect: "manual", headers: { cookie: `sso=a.b.c; sso=${aliceSso.slice(0, -6)}AAAAAA` } }));
    expectLoginRedirect(res.status, res.headers.get("location"), "bad duplicates");
    expect(setCookies(res).find((c) => c.name === "sso")?.attrs.get("max-age")).toBe("0");
  });

  it("logout clears the cookie, but a copy taken before stays valid until its exp (stateless, as documented)", async () => {
    const jar = new CookieJar();
    await browse(jar, `${h.url}/app/`, { login: { sub: "alice" } });
    const copy = jar.get(h.url, "sso")!;
    const out = await fetch(`${h.url}/_sso/logout`, { redirect: "manual", headers: { cookie: `sso=${copy}` } });
    expect(setCookies(out).find((c) => c.name === "sso")?.attrs.get("max-age")).toBe("0");
    const { rec } = await forwardedOnce(() => fetch(`${h.url}/app/after-logout`, { headers: { cookie: `sso=${copy}` } }));
    expect(headerValues(rec, "remote-user")).toEqual([alice]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("paths against the location rules", () => {
  // Harness locations: = /health, /public/ and ^~ /static/ unprotected; /admin, /team, ~ \.php$,
  // /app, /ws protected; anything else has no location (unprotected). `as`: what the upstream gets.
  type Want = { status: 400 } | { protected: true; as: string } | { protected: false; as: string };
  const cases: { target: string; want: Want; why?: string }[] = [
    { target: "//admin", want: { protected: true, as: "/admin" } },
    { target: "///admin", want: { protected: true, as: "/admin" } },
    { target: "/./admin", want: { protected: true, as: "/admin" } },
    { target: "/%61dmin", want: { protected: true, as: "/admin" } },
    { target: "/ADMIN", want: { protected: false, as: "/ADMIN" }, why: "prefixes are case-sensitive, as nginx's" },
    { target: "/%2Fadmin", want: { protected: true, as: "/admin" } },
    { target: "/%2fadmin", want: { protected: true, as: "/admin" } },
    { target: "/public/../admin", want: { protected: true, as: "/admin" } },
    { target: "/public/%2e%2e/admin", want: { protected: true, as: "/admin" } },
    { target: "/public/..%2fadmin", want: { protected: true, as: "/admin" } },
    { target: "/public/..%2Fadmin", want: { protected: true, as: "/admin" } },
    { target: "/public/%2e%2e%2fadmin", want: { protected: true, as: "/admin" } },
    { target: "/public/.%2e/admin", want: { protected: true, as: "/admin" } },
    { target: "/static/..%2fadmin", want: { protected: true, as: "/admin" } },
    { target: "/static/..%2fx.php", want: { protected: true, as: "/x.php" } },
    { target: "/public/x%3f/../../admin", want: { protected: true, as: "/admin" }, why: "a decoded ? is data, its dot segments still count" },
    { target: "/public/x%23/../../admin", want: { protected: true, as: "/admin" } },
    { target: "/public/..;/admin", want: { protected: false, as: "/public/..%3B/admin" }, why: "no path parameters; ; re-escaped so a servlet container cannot resolve ..;" },
    { target: "/admin;x", want: { protected: true, as: "/admin%3Bx" } },
    { target: "/admin%00", want: { status: 400 } },
    { target: "/public/%00/../../admin", want: { status: 400 } },
    { target: "/..", want: { status: 400 } },
    { target: "/../admin", want: { status: 400 } },
    { target: "/%2e%2e/admin", want: { status: 400 } },
    { target: "/.%2e/admin", want: { status: 400 } },
    { target: "/admin\\x", want: { protected: true, as: "/admin%5Cx" } },
    { target: "/admin%5c", want: { protected: true, as: "/admin%5C" } },
    { target: "/public\\..\\admin", want: { protected: false, as: "/public%5C..%5Cadmin" }, why: "backslash is no separator; re-escaped" },
    { target: "/x.php", want: { protected: true, as: "/x.php" } },
    { target: "/x.ph%70", want: { protected: true, as: "/x.php" } },
    { target: "/x.php%0a", want: { status: 400 }, why: "PCRE's $ would match before the newline" },
    { target: "/x.php%0d", want: { status: 400 } },
    { target: "/x.php%09", want: { status: 400 } },
    { target: "/x.PHP", want: { protected: false, as: "/x.PHP" }, why: "~ is case-sensitive" },
    { target: "/admin#x", want: { protected: true, as: "/admin" } },
    { target: "/public#/../admin", want: { protected: false, as: "/public" } },
    { target: "/public/%252e%252e/admin", want: { protected: false, as: "/public/%252e%252e/admin" }, why: "decoded once; the upstream must not decode it into .." },
    { target: "/public/%252e%252e%252fadmin", want: { protected: false, as: "/public/%252e%252e%252fadmin" } },
    { target: "/%252e%252e/admin", want: { protected: false, as: "/%252e%252e/admin" } },
    { target: "/public/%2561dmin", want: { protected: false, as: "/public/%2561dmin" } },
    { target: "/app/../static/x", want: { protected: false, as: "/static/x" } },
    { target: "/static/../app/x", want: { protected: true, as: "/app/x" } },
    { target: "/public/x?/../../admin", want: { protected: false, as: "/public/x?/../../admin" }, why: "the query is not part of the path, and passes as sent" },
    { target: "http://evil/admin", want: { protected: true, as: "/admin" } },
    { target: "http://evil/public/..%2fadmin", want: { protected: true, as: "/admin" } },
    { target: "HTTP://evil:99/admin", want: { protected: true, as: "/admin" } },
    { target: "admin", want: { status: 400 } },
    { target: "*", want: { status: 400 } },
    { target: "http:/admin", want: { status: 400 } },
  ];

  it.each(cases)("GET $target", async ({ target, want }) => {
    if ("status" in want) {
      for (const cookie of [[], [["Cookie", `sso=${aliceSso}`]]] as [string, string][][]) {
        const res = await nothingForwarded(() => rawRequest("GET", target, cookie), target);
        expect(res.status, target).toBe(400);
      }
      return;
    }
    if (want.protected) {
      const res = await nothingForwarded(() => rawRequest("GET", target), target);
      expectLoginRedirect(res.status, values(res, "location")[0], target);
      // The return path is the normalised one too.
      const state = new URL(values(res, "location")[0]!).searchParams.get("state")!;
      expect(decodeURIComponent(state.slice(state.indexOf(":") + 1)), target).toBe(want.as);
    } else {
      const { rec } = await forwardedOnce(() => rawRequest("GET", target), target);
      expect(rec.url, target).toBe(want.as);
      expect(headerValuesAnySpelling(rec, "remote-user"), target).toEqual([]);
    }
    const { out: res, rec } = await forwardedOnce(() => rawRequest("GET", target, [["Cookie", `sso=${aliceSso}`]]), `${target} with a session`);
    expect(res.status, target).toBe(200);
    expect(rec.url, target).toBe(want.as);
    expect(headerValues(rec, "remote-user"), target).toEqual(want.protected ? [alice] : []);
  });

  const methods: { method: string; target: string; status?: number }[] = [
    { method: "OPTIONS", target: "/admin" },
    { method: "HEAD", target: "/admin" },
    { method: "POST", target: "/app/form" },
    { method: "PUT", target: "/app/x" },
    { method: "DELETE", target: "/app/x" },
    { method: "PATCH", target: "/team/x" },
    { method: "TRACE", target: "/app/x" },
    { method: "PROPFIND", target: "/app/x" },
    { method: "PURGE", target: "/admin" },
    { method: "OPTIONS", target: "*", status: 400 },
    { method: "FOO", target: "/admin", status: 400 },
    { method: "CONNECT", target: "127.0.0.1:1", status: 0 },
  ];
  it.each(methods)("$method $target without a session: never forwarded", async ({ method, target, status }) => {
    const headers: [string, string][] = method === "OPTIONS" ? [["Origin", "http://evil.example"], ["Access-Control-Request-Method", "DELETE"]] : [];
    const res = await nothingForwarded(() => rawRequest(method, target, headers, method === "POST" || method === "PUT" ? { body: "" } : {}), `${method} ${target}`);
    if (status !== undefined) expect(res.status).toBe(status);
    else expectLoginRedirect(res.status, values(res, "location")[0], `${method} ${target}`);
  });
});

// ---------------------------------------------------------------------------------------------

describe("WebSocket upgrades", () => {
  const upgradeHeaders = (extra: [string, string][] = []): [string, string][] => [
    ["Connection", "Upgrade"],
    ["Upgrade", "websocket"],
    ["Sec-WebSocket-Version", "13"],
    ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
    ...extra,
  ];
  const cases: { name: string; target: string; extra: () => Promise<[string, string][]>; status: number }[] = [
    { name: "no cookie", target: "/ws/echo", extra: async () => [], status: 401 },
    { name: "a forged cookie", target: "/ws/echo", extra: async () => [["Cookie", `sso=${aliceSso.slice(0, -6)}AAAAAA`]], status: 401 },
    { name: "alg none", target: "/ws/echo", extra: async () => [["Cookie", `sso=${new UnsecuredJWT({ iss: h.idp.issuer, aud: clientId, email: alice, sub: "alice", exp: now() + 60, iat: now() }).encode()}`]], status: 401 },
    {
      name: "an expired cookie",
      target: "/ws/echo",
      extra: async () => [["Cookie", `sso=${await h.idp.signToken({ iss: h.idp.issuer, aud: clientId, sub: "alice", email: alice, scope: "openid password", iat: now() - 600, exp: now() - 300 })}`]],
      status: 401,
    },
    { name: "no cookie, a path that normalises into /ws", target: "/public/..%2fws/echo", extra: async () => [], status: 401 },
    { name: "no cookie, //ws", target: "//ws/echo", extra: async () => [], status: 401 },
    { name: "no cookie, an API client", target: "/ws/echo", extra: async () => [["Accept", "application/json"]], status: 401 },
    { name: "spoofed REMOTE-USER, no cookie", target: "/ws/echo", extra: async () => [["REMOTE-USER", alice]], status: 401 },
    { name: "a session, but to /_sso/", target: "/_sso/", extra: async () => [["Cookie", `sso=${aliceSso}`]], status: 404 },
    { name: "a path the proxy refuses", target: "/ws/%00", extra: async () => [], status: 400 },
  ];
  it.each(cases)("$name ($target): $status, never 101", async ({ name, target, extra, status }) => {
    const headers = upgradeHeaders(await extra());
    const res = await nothingForwarded(() => rawRequest("GET", target, headers), name);
    expect(res.status, name).toBe(status);
    expect(values(res, "upgrade"), name).toEqual([]);
  });
});

describe("/_sso/ is the proxy's, even under a catch-all regex", () => {
  let s: ProxyHarness;
  let sso: string;
  beforeAll(async () => {
    s = await startProxyHarness({ locations: "location:\n  - match: ~* ^/secret\n    groups: true\n  - match: ~ .*\n" });
    const jar = new CookieJar();
    const r = await browse(jar, `${s.url}/SECRET/x`, { login: { sub: "alice" } });
    expect(r.final.status, JSON.stringify(r.hops)).toBe(200);
    sso = jar.get(s.url, "sso")!;
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("~* took /SECRET (case-insensitive), with its groups", () => {
    const rec = s.upstream.requests.find((r) => r.url === "/SECRET/x")!;
    expect(headerValues(rec, "remote-user")).toEqual([alice]);
    expect(headerValues(rec, "user-groups")).toEqual(["dev,ops"]);
  });

  // `session`: the status with alice's session, when it differs.
  const cases: { target: string; status: number; session?: number; body?: string }[] = [
    { target: "/_sso/healthz", status: 200, body: "ok\n" },
    { target: "/_sso/readyz", status: 200, body: "ok\n" },
    { target: "/_sso/anything", status: 404 },
    { target: "/_sso/", status: 403 },
    { target: "/_sso/logout", status: 200 },
    { target: "/_sso/logout?rd=/x", status: 302 },
    { target: "/_sso/auth/password", status: 401, session: 200 },
    { target: "/%5Fsso/healthz", status: 200, body: "ok\n" },
    { target: "/%5fsso%2fhealthz", status: 200, body: "ok\n" },
    { target: "//_sso//healthz", status: 200, body: "ok\n" },
    { target: "/x/../_sso/anything", status: 404 },
    { target: "/_sso/./x/../anything", status: 404 },
    { target: "http://evil/_sso/anything", status: 404 },
  ];
  it.each(cases)("$target: answered by the proxy ($status), with or without a session", async ({ target, status, session, body }) => {
    for (const cookie of [[], [["Cookie", `sso=${sso}`]]] as [string, string][][]) {
      const before = s.upstream.requests.length;
      const res = await rawRequest("GET", target, cookie, { port: s.port });
      expect(s.upstream.requests.slice(before).map((r) => r.url), target).toEqual([]);
      expect(res.status, target).toBe(cookie.length > 0 ? (session ?? status) : status);
      if (body !== undefined) expect(res.body, target).toBe(body);
    }
  });

  it("/_SSO/ is not the proxy's: the catch-all regex protects it", async () => {
    const before = s.upstream.requests.length;
    const res = await rawRequest("GET", "/_SSO/healthz", [], { port: s.port });
    expectLoginRedirect(res.status, values(res, "location")[0], "/_SSO/", s);
    expect(s.upstream.requests.length).toBe(before);
  });
});

// ---------------------------------------------------------------------------------------------

describe("caching, referrers, smuggling", () => {
  const noStore: { name: string; fetch: () => Promise<Response> }[] = [
    { name: "login redirect", fetch: () => fetch(`${h.url}/app/cache`, { redirect: "manual" }) },
    { name: "login redirect of a bad session", fetch: () => fetch(`${h.url}/app/cache`, { redirect: "manual", headers: { cookie: "sso=a.b.c" } }) },
    { name: "API client's 401", fetch: () => fetch(`${h.url}/app/cache`, { redirect: "manual", headers: { accept: "application/json" } }) },
    { name: "/_sso/healthz", fetch: () => fetch(`${h.url}/_sso/healthz`) },
    { name: "/_sso/readyz", fetch: () => fetch(`${h.url}/_sso/readyz`) },
    { name: "/_sso/ unknown", fetch: () => fetch(`${h.url}/_sso/nope`) },
    { name: "/_sso/logout", fetch: () => fetch(`${h.url}/_sso/logout`, { redirect: "manual" }) },
    { name: "/_sso/auth/ 401", fetch: () => fetch(`${h.url}/_sso/auth/password`) },
    { name: "/_sso/auth/ 200", fetch: () => fetch(`${h.url}/_sso/auth/password`, { headers: { cookie: `sso=${aliceSso}` } }) },
    { name: "callback 403", fetch: () => callCallback({ code: "x", state: "y:/" }) },
    { name: "callback 405", fetch: () => fetch(`${h.url}${callbackPath}?code=x&state=y`, { method: "POST", redirect: "manual" }) },
  ];
  it.each(noStore)("Cache-Control: no-store on $name", async ({ name, fetch: get }) => {
    const res = await nothingForwarded(get, name);
    expect(res.headers.get("cache-control"), `${name} (${res.status})`).toContain("no-store");
  });

  // Every answer of the callback: the code and state are in its URL.
  const callbackAnswers: { name: string; status: number; get: () => Promise<Response> }[] = [
    {
      name: "success",
      status: 302,
      get: async () => {
        const l = await loginUntilCallback("/app/ref?x=1");
        return callCallback(`${l.callback.search.slice(1)}`, `sso_csrf=${l.csrf}`);
      },
    },
    { name: "no csrf cookie", status: 403, get: () => callCallback({ code: "x", state: "y:/" }) },
    {
      name: "no code",
      status: 400,
      get: async () => {
        const l = await loginUntilCallback();
        return callCallback({ state: `${l.csrf}:/` }, `sso_csrf=${l.csrf}`);
      },
    },
    {
      name: "provider error",
      status: 403,
      get: async () => {
        const l = await loginUntilCallback();
        return callCallback({ error: "access_denied", state: `${l.csrf}:/` }, `sso_csrf=${l.csrf}`);
      },
    },
    { name: "wrong method", status: 405, get: () => fetch(`${h.url}${callbackPath}?code=x&state=y`, { method: "POST", redirect: "manual" }) },
  ];
  it.each(callbackAnswers)("Referrer-Policy: no-referrer and no-store on the callback's $name ($status)", async ({ name, status, get }) => {
    const res = await nothingForwarded(get, name);
    expect(res.status, name).toBe(status);
    expect(res.headers.get("referrer-policy"), name).toBe("no-referrer");
    expect(res.headers.get("cache-control"), name).toContain("no-store");
    if (status === 302) {
      // The code and state stay behind: the browser goes to the original URI exactly.
      expect(res.headers.get("location")).toBe("/app/ref?x=1");
    }
  });

  const smuggling: { name: string; target: string; headers: string[]; body: string }[] = [
    { name: "CL + TE on a public path", target: "/public/smuggle", headers: ["Content-Length: 4", "Transfer-Encoding: chunked"], body: "0\r\n\r\nGET /admin/smuggled HTTP/1.1\r\nHost: x\r\n\r\n" },
    { name: "TE + CL on a protected path with a session", target: "/app/smuggle", headers: ["Transfer-Encoding: chunked", "Content-Length: 40"], body: "0\r\n\r\nGET /admin/smuggled HTTP/1.1\r\nHost: x\r\n\r\n" },
    { name: "two Content-Lengths that differ", target: "/public/smuggle", headers: ["Content-Length: 4", "Content-Length: 40"], body: "abcd" },
    { name: "Transfer-Encoding not ending in chunked", target: "/public/smuggle", headers: ["Transfer-Encoding: chunked, identity"], body: "0\r\n\r\n" },
  ];
  it.each(smuggling)("$name: 400, nothing forwarded", async ({ name, target, headers, body }) => {
    const res = await nothingForwarded(
      () => rawRequest("POST", target, [...headers, "Connection: keep-alive", `Cookie: sso=${aliceSso}`], { body }),
      name,
    );
    expect(res.status, name).toBe(400);
  });
});
