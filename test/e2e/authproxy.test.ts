// `capstan authproxy` as an operator runs it: a real process reading conf/config.yaml, a real
// OpenID provider, an upstream, and a real Chromium (Debian's, driven by playwright-core) going
// from the first redirect through the provider's login form to the upstream's page
// (docs/authproxy.md).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../cli/free-port.ts";
import { makePki } from "../helpers/certs.ts";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { headerValues, startEchoUpstream, type EchoUpstream } from "../helpers/echo-upstream.ts";
import { browse, CookieJar, startTestProvider, type TestProvider } from "../helpers/oidc-provider.ts";
import { pollUntil } from "../helpers/poll.ts";

const chromiumPath = process.env.CAPSTAN_CHROMIUM ?? "/usr/bin/chromium";

let upstream: EchoUpstream;
let idp: TestProvider;
let proxy: CapstanProcess;
let proxyUrl: string;
let confDir: string;


beforeAll(async () => {
  confDir = mkdtempSync(join(tmpdir(), "capstan-authproxy-e2e-"));
  upstream = await startEchoUpstream();
  const port = await freePort();
  proxyUrl = `http://127.0.0.1:${port}`;
  idp = await startTestProvider({
    clients: [{ client_id: "app", client_secret: "app-secret", redirect_uris: [`${proxyUrl}/_sso/`] }],
    accounts: { alice: { email: "alice@example.com", groups: ["dev"] } },
  });
  writeFileSync(
    join(confDir, "config.yaml"),
    `issuer: ${idp.issuer}
upstream: ${upstream.url}
oauth2_client:
  id: app
  secret: app-secret
location:
  - match: = /healthz
    auth_type: none
  - match: /
    groups: true
`,
    { mode: 0o600 },
  );
  proxy = await startCapstan("authproxy", ["-web", `127.0.0.1:${port}`, "-conf", confDir]);
  await pollUntil("the provider's endpoints", async () => (await fetch(`${proxyUrl}/_sso/readyz`)).status === 200, 10_000);
}, 60_000);

afterAll(async () => {
  await proxy?.stop();
  await Promise.all([idp?.stop(), upstream?.stop()]);
  if (confDir) rmSync(confDir, { recursive: true, force: true });
});

describe("capstan authproxy (process)", () => {
  it("logs a cookie-jar client in and passes its identity", async () => {
    const jar = new CookieJar();
    const r = await browse(jar, `${proxyUrl}/dashboard?tab=1`, { login: { sub: "alice" } });
    expect(r.final.status, JSON.stringify(r.hops, null, 1)).toBe(200);
    const rec = upstream.requests.find((x) => x.url === "/dashboard?tab=1")!;
    expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
    expect(headerValues(rec, "user-groups")).toEqual(["dev"]);
    expect((await fetch(`${proxyUrl}/healthz`)).status).toBe(200);
  });

  it("logs a real Chromium in, from the first redirect to the upstream's page", async () => {
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"], timeout: 30_000 });
      const page = await browser.newPage();
      const first = await page.goto(`${proxyUrl}/reports/weekly`);
      // The provider's login form, reached through the proxy's 302.
      expect(new URL(page.url()).origin).toBe(idp.issuer);
      const chain: string[] = [];
      for (let r = first?.request() ?? null; r; r = r.redirectedFrom()) chain.unshift(r.url());
      expect(chain[0]).toBe(`${proxyUrl}/reports/weekly`);
      expect(new URL(chain[1]!).searchParams.get("redirect_uri")).toBe(`${proxyUrl}/_sso/`);
      await page.fill('input[name="login"]', "alice");
      await page.fill('input[name="password"]', "any");
      await Promise.all([page.waitForURL(`${proxyUrl}/reports/weekly`), page.click('button[type="submit"]')]);
      // The echo upstream's page lists the headers it received: the proxy's REMOTE-USER among them.
      const body = await page.textContent("body");
      expect(body).toContain("alice@example.com");
      const rec = upstream.requests.find((x) => x.url === "/reports/weekly")!;
      expect(headerValues(rec, "remote-user")).toEqual(["alice@example.com"]);
      const cookies = await page.context().cookies(proxyUrl);
      const sso = cookies.find((c) => c.name === "sso")!;
      expect(sso.httpOnly).toBe(true);
      expect(sso.path).toBe("/");
      // Logout clears the proxy's session: the next page goes through the provider again (whose
      // own session still stands, so without a password prompt: docs/authproxy.md#logout).
      await page.goto(`${proxyUrl}/_sso/logout`);
      expect((await page.context().cookies(proxyUrl)).some((c) => c.name === "sso")).toBe(false);
      const tokens = idp.hits.get("/token") ?? 0;
      await page.goto(`${proxyUrl}/reports/monthly`);
      expect(page.url()).toBe(`${proxyUrl}/reports/monthly`);
      expect(idp.hits.get("/token")).toBe(tokens + 1);
    } finally {
      await browser?.close();
    }
  });

  it("serves HTTPS with Secure; SameSite=Lax cookies", async () => {
    const pki = await makePki();
    let tlsProxy: CapstanProcess | undefined;
    try {
      const cert = await pki.issue("proxy", { ip: ["127.0.0.1"] });
      tlsProxy = await startCapstan("authproxy", ["-conf", confDir, "-tls-cert", cert.cert, "-tls-key", cert.key]);
      const url = tlsProxy.url.replace("http:", "https:");
      const dispatcher = new Agent({ connect: { ca: readFileSync(pki.ca, "utf8") } });
      await pollUntil("readyz over HTTPS", async () => (await undiciFetch(`${url}/_sso/readyz`, { dispatcher })).status === 200, 10_000);
      const res = await undiciFetch(`${url}/private`, { dispatcher, redirect: "manual" });
      expect(res.status).toBe(302);
      expect(new URL(res.headers.get("location")!).searchParams.get("redirect_uri")).toBe(`${url}/_sso/`);
      const csrf = res.headers.getSetCookie().find((c) => c.startsWith("sso_csrf="))!;
      expect(csrf).toMatch(/; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
      await dispatcher.close();
    } finally {
      await tlsProxy?.stop();
      await pki.remove();
    }
  });

  it("refuses a bad config, naming the key and the line, and does not start", async () => {
    const bad = mkdtempSync(join(tmpdir(), "capstan-authproxy-bad-"));
    try {
      writeFileSync(join(bad, "config.yaml"), `issuer: ${idp.issuer}\nupstream: ${upstream.url}\noauth2_client: {id: a, secret: b}\nlocation:\n  - match: /x\n    auth_type: none\n    groups: true\n`);
      const started = await runCapstan(["authproxy", "-web", "127.0.0.1:0", "-conf", bad]);
      expect(started.code).toBe(2);
      expect(started.stderr).toContain("config.yaml:7: location[0].groups: cannot be true with auth_type: none");
      const checked = await runCapstan(["authproxy", "check-config", "-conf", bad]);
      expect(checked.code).toBe(2);
      const good = await runCapstan(["authproxy", "check-config", "-conf", confDir]);
      expect(good.code, good.stderr).toBe(0);
      expect(good.stdout).toContain("valid (2 locations)");
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });
});
