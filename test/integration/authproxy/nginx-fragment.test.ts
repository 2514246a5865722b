// `capstan authproxy generate` through a real nginx (docs/authproxy.md#nginx): the fragment passes
// `nginx -t`, and protected, unprotected and callback locations behave through nginx +
// auth_request as they do through `capstan authproxy` itself.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthProxyConfig } from "../../../api/authproxy/config.ts";
import { nginxFragment } from "../../../api/authproxy/nginx-fragment.ts";
import { runCapstan } from "../../helpers/capstan-process.ts";
import { headerValues, headerValuesAnySpelling } from "../../helpers/echo-upstream.ts";
import { nginxTest, startNginx, type NginxProcess } from "../../helpers/nginx.ts";
import { browse, CookieJar } from "../../helpers/oidc-provider.ts";
import { configYaml, parseSetCookie, startProxyHarness, type ProxyHarness } from "./harness.ts";

let h: ProxyHarness;
let nginx: NginxProcess;
let front: string;
let confDir: string;

/** `capstan authproxy generate` as a user runs it. */
const generate = (dir: string, authProxy: string) => runCapstan(["authproxy", "generate", "-conf", dir, "-authproxy", authProxy]);

beforeAll(async () => {
  confDir = mkdtempSync(join(tmpdir(), "capstan-authproxy-conf-"));
  h = await startProxyHarness({
    beforeProvider: async (proxyUrl, upstreamUrl) => {
      // The fragment needs only the upstream and the locations; the issuer is not in it.
      writeFileSync(join(confDir, "config.yaml"), configYaml("http://127.0.0.1:1", upstreamUrl), { mode: 0o600 });
      const out = await generate(confDir, proxyUrl);
      if (out.code !== 0) throw new Error(`generate failed: ${out.stderr}`);
      nginx = await startNginx(out.stdout);
      front = `http://127.0.0.1:${nginx.port}`;
      return [`${front}/_sso/`];
    },
  });
}, 60_000);

afterAll(async () => {
  await nginx?.stop();
  await h?.stop();
  if (confDir) rmSync(confDir, { recursive: true, force: true });
});

/** A raw request, header spellings and duplicates kept. */
function raw(base: string, path: string, headers: [string, string][] = []): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: "GET", headers: [["Host", u.host], ...headers].flat() as unknown as Record<string, string> }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the generated nginx fragment", () => {
  it("passes nginx -t, also with regexes that need quoting", async () => {
    const tricky = parseAuthProxyConfig(
      `issuer: https://sso.example.com\nupstream: http://127.0.0.1:3000\noauth2_client: {id: a, secret: b, redirect_uri: "https://app.example.com/login/callback"}\nlocation:\n  - match: '~ ^/a{2}/[a-z ]+;x$'\n  - match: ~* \\\\.(png|jpg)$\n    auth_type: none\n  - match: = /x y\n    groups: true\n  - match: ^~ /static/\n    auth_type: none\n  - match: /\n`,
      "tricky.yaml",
    );
    const fragment = nginxFragment(tricky, { authProxyUrl: "http://127.0.0.1:8080" });
    expect(fragment).toContain("location = \"/login/callback\"");
    expect(fragment).not.toMatch(/^location \/ \{$/m);
    const t = await nginxTest(fragment);
    expect(t.ok, `${t.output}\n${fragment}`).toBe(true);
    // Only unprotected locations, and ^~ / as the root: still valid nginx (no login location, no second "/").
    const open = parseAuthProxyConfig(`issuer: https://sso.example.com\nupstream: http://127.0.0.1:3000\noauth2_client: {id: a, secret: b}\nlocation:\n  - match: ^~ /\n    auth_type: none\n`, "open.yaml");
    const t3 = await nginxTest(nginxFragment(open, { authProxyUrl: "http://127.0.0.1:8080" }));
    expect(t3.ok, t3.output).toBe(true);
    // -authproxy naming an upstream block (kept-alive auth checks, docs/authproxy.md#nginx).
    const named = nginxFragment(tricky, { authProxyUrl: "http://capstan_authproxy" });
    expect(named).toContain("proxy_pass http://capstan_authproxy;");
    const t2 = await nginxTest(named, { extraHttp: "upstream capstan_authproxy {\n  server 127.0.0.1:8080;\n  keepalive 16;\n}" });
    expect(t2.ok, t2.output).toBe(true);
  });

  it("forwards unprotected locations with client identity headers removed", async () => {
    const before = h.upstream.requests.length;
    const rewrites = ["X-Original-URL", "X-Rewrite-URL", "X-Forwarded-Uri", "X-Forwarded-Prefix", "X-Original-URI", "Proxy-Authorization"];
    const res = await raw(front, "/public/page", [
      ["REMOTE-USER", "admin@example.com"],
      ["remote-user", "root"],
      ["Remote_User", "x"],
      ["USER-GROUPS", "admins"],
      ...rewrites.map((name): [string, string] => [name, "/admin"]),
    ]);
    expect(res.status).toBe(200);
    const rec = await h.upstream.waitFor("the request upstream", () => h.upstream.requests.slice(before).find((r) => r.url === "/public/page"));
    expect(headerValuesAnySpelling(rec, "remote-user")).toEqual([]);
    expect(headerValuesAnySpelling(rec, "user-groups")).toEqual([]);
    // Headers some applications take as the request's path: the client's copies do not pass.
    for (const name of rewrites) expect(headerValues(rec, name), name).toEqual([]);
  });

  it("redirects a protected request to the provider with the parameters of docs/authproxy.md and the csrf cookie", async () => {
    const res = await fetch(`${front}/app/page?x=1`, { redirect: "manual" });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(h.oidc.endpoints.authorization);
    expect(location.searchParams.get("redirect_uri")).toBe(`${front}/_sso/`);
    expect(location.searchParams.get("scope")).toBe("openid password");
    const state = location.searchParams.get("state")!;
    expect(state.slice(state.indexOf(":") + 1)).toBe(encodeURIComponent("/app/page?x=1"));
    const csrf = res.headers.getSetCookie().map(parseSetCookie).find((c) => c.name === "sso_csrf")!;
    expect(state.startsWith(`${csrf.value}:`)).toBe(true);
    expect(csrf.attrs.has("httponly")).toBe(true);
    expect(res.headers.get("cache-control")).toContain("no-store");
  });

  it("answers 401 to an API client, and never serves the auth checks to a client", async () => {
    expect((await fetch(`${front}/app/api`, { redirect: "manual", headers: { accept: "application/json" } })).status).toBe(401);
    expect((await fetch(`${front}/_sso/auth/password`, { redirect: "manual" })).status).toBe(404);
  });

  it("logs in through nginx and passes REMOTE-USER, USER-GROUPS and the cookies without the proxy's", async () => {
    const jar = new CookieJar();
    jar.set(front, "theme", "dark");
    const r = await browse(jar, `${front}/team/board`, { login: { sub: "alice" } });
    expect(r.final.status, JSON.stringify(r.hops, null, 1)).toBe(200);
    expect(r.finalUrl).toBe(`${front}/team/board`);
    const rec = [...h.upstream.requests].reverse().find((x) => x.url === "/team/board")!;
    expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
    expect(headerValues(rec, "user-groups")).toEqual(["dev,ops"]);
    expect(headerValues(rec, "cookie")).toEqual(["theme=dark"]);

    // A spoofed header next to a valid session: exactly the proxy's value.
    const spoofed = await raw(front, "/app/spoof", [
      ["Cookie", jar.cookieHeader(front)],
      ["REMOTE-USER", "admin@example.com"],
      ["Remote-User", "root"],
    ]);
    expect(spoofed.status).toBe(200);
    const rec2 = [...h.upstream.requests].reverse().find((x) => x.url === "/app/spoof")!;
    expect(headerValuesAnySpelling(rec2, "remote-user")).toEqual(["alice@example.com"]);
    expect(headerValuesAnySpelling(rec2, "user-groups")).toEqual([]);
  });

  it("does not loop when the provider will not grant a location's scopes (callback through nginx)", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${front}/admin/x`, { login: { sub: "bob" } });
    expect(r.final.status).toBe(403);
    expect(r.hops.filter((hop) => hop.url.includes("/auth?")).length).toBe(1);
  });

  // The auth checks (/_sso/auth/...) are nginx's subrequests: internal in nginx, served by the
  // proxy (which nginx calls); the test above covers them.
  it("answers like capstan authproxy itself for every location kind", async () => {
    const jar = new CookieJar();
    await browse(jar, `${h.url}/app/`, { login: { sub: "alice" } });
    const session = jar.get(h.url, "sso")!;
    const paths = ["/health", "/public/x", "/static/a.php", "/x/a.php", "/x/a.PHP", "/admin", "/adminx", "/app", "/team/1", "/elsewhere", "//app", "/public/../app", "/public/%2e%2e/app", "/_sso/nothing", "/.."];
    const statuses = async (base: string, cookie?: string) =>
      Promise.all(paths.map(async (p) => (await raw(base, p, cookie ? [["Cookie", `sso=${cookie}`]] : [])).status));
    const directAnon = await statuses(h.url);
    const nginxAnon = await statuses(front);
    const directIn = await statuses(h.url, session);
    const nginxIn = await statuses(front, session);
    const table = paths.map((p, i) => `${p}: direct ${directAnon[i]}/${directIn[i]} nginx ${nginxAnon[i]}/${nginxIn[i]}`).join("\n");
    expect(nginxAnon, table).toEqual(directAnon);
    expect(nginxIn, table).toEqual(directIn);
  });
});
