// The whole authorization code flow through the auth proxy, against a real OpenID provider, with a
// cookie jar: the redirect, callback and token request of docs/authproxy.md, "The login", the session cookie, the headers the
// upstream receives, step-up, groups, logout, JSON clients, WebSockets (docs/authproxy.md).
import { connect } from "node:net";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headerValues, headerValuesAnySpelling } from "../../helpers/echo-upstream.ts";
import { browse, CookieJar } from "../../helpers/oidc-provider.ts";
import { discoverEndpoints } from "../../../adapters/identity/oidc.ts";
import { accounts, clientId, parseSetCookie, startProxyHarness, type ProxyHarness } from "./harness.ts";

let h: ProxyHarness;

beforeAll(async () => {
  h = await startProxyHarness({ extraConfig: "realm: corp\n" });
});
afterAll(async () => {
  await h?.stop();
});

/** Send raw bytes to the proxy; resolves with the response head (status line and headers). */
function responseHead(request: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const s = connect(h.port, "127.0.0.1");
    let got = "";
    s.on("data", (d) => {
      got += d.toString("latin1");
      if (got.includes("\r\n\r\n")) {
        s.destroy();
        resolve(got);
      }
    });
    s.on("error", reject);
    s.on("close", () => resolve(got));
    s.write(request);
  });
}

const lastRequest = (path: string) => [...h.upstream.requests].reverse().find((r) => r.url === path);

describe("auth proxy: the code flow", () => {
  it("redirects a protected request exactly as docs/authproxy.md writes it", async () => {
    const res = await fetch(`${h.url}/app/page?x=1&y=a%20b`, { redirect: "manual" });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(h.oidc.endpoints.authorization);
    const q = location.searchParams;
    expect(q.get("response_type")).toBe("code");
    expect(q.get("redirect_uri")).toBe(`${h.url}/_sso/`);
    expect(q.get("realm")).toBe("corp");
    expect(q.get("client_id")).toBe(clientId);
    expect(q.get("scope")).toBe("openid password");
    const state = q.get("state")!;
    const csrf = state.slice(0, state.indexOf(":"));
    expect(state.slice(csrf.length + 1)).toBe(encodeURIComponent("/app/page?x=1&y=a%20b"));
    expect(q.get("code_challenge_method")).toBe("S256");
    expect(q.get("nonce")).toBe(h.csrf.nonce(csrf));
    const cookies = res.headers.getSetCookie().map(parseSetCookie);
    const c = cookies.find((x) => x.name === "sso_csrf")!;
    expect(c.value).toBe(csrf);
    expect(c.attrs.get("path")).toBe("/");
    expect(c.attrs.has("httponly")).toBe(true);
    expect(c.attrs.has("secure")).toBe(false);
    expect(res.headers.get("cache-control")).toContain("no-store");
    expect(h.upstream.requests.some((r) => r.url.startsWith("/app/page"))).toBe(false);
  });

  it("reuses the csrf value of the request's cookie when the proxy issued it", async () => {
    const first = await fetch(`${h.url}/app`, { redirect: "manual" });
    const csrf = parseSetCookie(first.headers.getSetCookie()[0]!).value;
    const again = await fetch(`${h.url}/app/other`, { redirect: "manual", headers: { cookie: `sso_csrf=${csrf}` } });
    expect(new URL(again.headers.get("location")!).searchParams.get("state")!.startsWith(`${csrf}:`)).toBe(true);
    // A value the proxy never issued is replaced.
    const planted = await fetch(`${h.url}/app/other`, { redirect: "manual", headers: { cookie: "sso_csrf=attacker" } });
    expect(new URL(planted.headers.get("location")!).searchParams.get("state")!.startsWith("attacker:")).toBe(false);
  });

  it("logs in, sets the sso cookie, and passes REMOTE-USER to the upstream", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/app/page?x=1`, { login: { sub: "alice" } });
    expect(r.final.status, JSON.stringify(r.hops, null, 1)).toBe(200);
    expect(r.finalUrl).toBe(`${h.url}/app/page?x=1`);
    const callback = r.hops.find((hop) => hop.url.startsWith(`${h.url}/_sso/`))!;
    expect(callback.status).toBe(302);
    expect(callback.location).toBe("/app/page?x=1");
    const sso = callback.setCookie.map(parseSetCookie).find((c) => c.name === "sso")!;
    expect(decodeJwt(sso.value).email).toBe("alice@example.com");
    expect(sso.attrs.get("path")).toBe("/");
    expect(sso.attrs.has("httponly")).toBe(true);
    const maxAge = Number(sso.attrs.get("max-age"));
    expect(maxAge).toBeGreaterThan(0);
    expect(maxAge).toBeLessThanOrEqual(300);
    // The csrf value is spent: its cookie is cleared.
    const cleared = callback.setCookie.map(parseSetCookie).find((c) => c.name === "sso_csrf")!;
    expect(cleared.attrs.get("max-age")).toBe("0");
    const rec = lastRequest("/app/page?x=1")!;
    expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
    expect(headerValuesAnySpelling(rec, "user-groups")).toEqual([]);
    // The proxy's cookies do not reach the upstream.
    expect(headerValues(rec, "cookie").join(";")).not.toMatch(/(^|;\s*)(sso|sso_csrf)=/);

    // With the session: straight through, no provider call.
    const tokenCalls = h.idp.hits.get("/token") ?? 0;
    const again = await fetch(`${h.url}/app/again`, { headers: { cookie: jar.cookieHeader(h.url) } });
    expect(again.status).toBe(200);
    expect(headerValues(lastRequest("/app/again")!, "remote-user")).toEqual(["alice@example.com"]);
    expect(h.idp.hits.get("/token") ?? 0).toBe(tokenCalls);
  });

  it("passes USER-GROUPS where the location asks for them", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/team/x`, { login: { sub: "alice" } });
    expect(r.final.status).toBe(200);
    const rec = lastRequest("/team/x")!;
    expect(headerValues(rec, "user-groups")).toEqual(["dev,ops"]);
    expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
  });

  it("steps up: a password session asks again with the scopes /admin needs", async () => {
    const jar = new CookieJar();
    await browse(jar, `${h.url}/app/`, { login: { sub: "alice" } });
    const res = await fetch(`${h.url}/admin/panel`, { redirect: "manual", headers: { cookie: jar.cookieHeader(h.url) } });
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get("location")!).searchParams.get("scope")).toBe("openid password sms");
    const r = await browse(jar, `${h.url}/admin/panel`, { login: { sub: "alice" } });
    expect(r.final.status).toBe(200);
    expect(headerValues(lastRequest("/admin/panel")!, "remote-user")).toEqual(["alice@example.com"]);
  });

  it("does not loop when the provider will not grant what the location needs", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/admin/panel2`, { login: { sub: "bob" } });
    expect(r.final.status).toBe(403);
    expect(await r.final.text()).toContain("scope sms");
    expect(r.hops.filter((hop) => hop.url.includes("/auth?")).length).toBe(1);
    expect(lastRequest("/admin/panel2")).toBeUndefined();
    // bob's session is good where password is enough.
    const ok = await fetch(`${h.url}/app/bob`, { headers: { cookie: jar.cookieHeader(h.url) } });
    expect(ok.status).toBe(200);
    expect(headerValues(lastRequest("/app/bob")!, "remote-user")).toEqual(["bob@example.com"]);
  });

  it("refuses an e-mail the provider marks unverified", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/app/eve`, { login: { sub: "eve" } });
    expect(r.final.status).toBe(502);
    expect(await r.final.text()).toContain("email not verified");
    expect(lastRequest("/app/eve")).toBeUndefined();
  });

  it("answers 401 to an API client instead of a redirect", async () => {
    const res = await fetch(`${h.url}/app/api`, { redirect: "manual", headers: { accept: "application/json" } });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: "login required" });
  });

  it("forwards unprotected locations without login, and ^~ wins over a protected regex", async () => {
    for (const path of ["/health", "/public/a", "/static/x.php", "/elsewhere"]) {
      const res = await fetch(`${h.url}${path}`, { redirect: "manual" });
      expect(res.status, path).toBe(200);
    }
    const php = await fetch(`${h.url}/x/y.php`, { redirect: "manual" });
    expect(php.status).toBe(302);
  });

  it("logs out", async () => {
    const jar = new CookieJar();
    await browse(jar, `${h.url}/app/`, { login: { sub: "alice" } });
    const res = await fetch(`${h.url}/_sso/logout?rd=/public/bye`, { redirect: "manual", headers: { cookie: jar.cookieHeader(h.url) } });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/public/bye");
    const cleared = res.headers.getSetCookie().map(parseSetCookie).find((c) => c.name === "sso")!;
    expect(cleared.attrs.get("max-age")).toBe("0");
    const evil = await fetch(`${h.url}/_sso/logout?rd=//evil.example`, { redirect: "manual" });
    expect(evil.headers.get("location")).toBe("/");
    // Without rd: a page, not a redirect to a protected "/" that would log straight back in.
    const plain = await fetch(`${h.url}/_sso/logout`, { redirect: "manual" });
    expect(plain.status).toBe(200);
    expect(await plain.text()).toContain("logged out");
    expect(plain.headers.getSetCookie().map(parseSetCookie).find((c) => c.name === "sso")!.attrs.get("max-age")).toBe("0");
  });

  it("serves probes under /_sso/ and never forwards /_sso/ paths", async () => {
    expect((await fetch(`${h.url}/_sso/healthz`)).status).toBe(200);
    expect((await fetch(`${h.url}/_sso/readyz`)).status).toBe(200);
    expect((await fetch(`${h.url}/_sso/anything`)).status).toBe(404);
    // The callback is GET only: a HEAD (a link checker) must not spend a login's code.
    expect((await fetch(`${h.url}/_sso/?code=x&state=y:z`, { method: "HEAD" })).status).toBe(405);
    expect(h.upstream.requests.some((r) => r.url.startsWith("/_sso"))).toBe(false);
  });

  it("leaves out group names a header cannot carry, in both modes, and keeps serving", async () => {
    accounts.gina = { email: "gina@example.com", groups: ["開発", "dev", "a,b", "ops"] };
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/team/gina`, { login: { sub: "gina" } });
    expect(r.final.status).toBe(200);
    expect(headerValues(lastRequest("/team/gina")!, "user-groups")).toEqual(["dev,ops"]);
    const check = await fetch(`${h.url}/_sso/auth/password/groups`, { headers: { cookie: jar.cookieHeader(h.url) } });
    expect(check.status).toBe(200);
    expect(check.headers.get("x-auth-request-groups")).toBe("dev,ops");
    expect((await fetch(`${h.url}/_sso/healthz`)).status).toBe(200);
  });

  it("refuses an e-mail a header cannot carry", async () => {
    accounts.hiro = { email: "用户@example.com" };
    const jar = new CookieJar();
    const r = await browse(jar, `${h.url}/app/hiro`, { login: { sub: "hiro" } });
    expect(r.final.status).toBe(502);
    expect(lastRequest("/app/hiro")).toBeUndefined();
  });

  it("closes the connection after answering a request whose body it did not read", async () => {
    const answer = await responseHead(`POST /app/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nabc`);
    expect(answer.split("\r\n")[0]).toMatch(/^HTTP\/1\.1 302/);
    expect(answer.toLowerCase()).toContain("connection: close");
  });

  it("takes the issuer's spelling from the discovery document (a trailing slash in config)", async () => {
    const endpoints = await discoverEndpoints(`${h.idp.issuer}/`, {});
    expect(endpoints.issuer).toBe(h.idp.issuer);
  });

  it("takes WebSocket upgrades through the same checks", async () => {
    const upgrade = (cookie: string) =>
      responseHead(
        `GET /ws/echo HTTP/1.1\r\nHost: 127.0.0.1:${h.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${cookie ? `Cookie: ${cookie}\r\n` : ""}\r\n`,
      );
    const refused = await upgrade("");
    expect(refused.split("\r\n")[0]).toMatch(/^HTTP\/1\.1 401/);
    const jar = new CookieJar();
    await browse(jar, `${h.url}/app/`, { login: { sub: "alice" } });
    const accepted = await upgrade(jar.cookieHeader(h.url));
    expect(accepted.split("\r\n")[0]).toMatch(/^HTTP\/1\.1 101/);
    const rec = [...h.upstream.requests].reverse().find((r) => r.upgrade)!;
    expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
    // Other protocols are not tunnelled (after a 101 no header rule applies).
    const h2c = await responseHead(`GET /public/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n`);
    expect(h2c.split("\r\n")[0]).toMatch(/^HTTP\/1\.1 400/);
  });
});
