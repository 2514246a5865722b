// Signing in to the web console with single sign-on, in a real Chromium: a real `capstan console`
// process with -oidc-*, a real OpenID provider (oidc-provider), the provider's own login page.
// The console maps the ID token's verified e-mail to its users: an -oidc-admins e-mail is an
// admin, another a user with the apps it maintains (docs/web-console.md, "Signing in").
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { freePort } from "../../cli/free-port.ts";
import { startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { startTestProvider, type TestProvider } from "../helpers/oidc-provider.ts";

const chromiumPath = process.env.CAPSTAN_CHROMIUM ?? "/usr/bin/chromium";
const clientId = "capstan-web";
const clientSecret = randomBytes(24).toString("base64url");

describe("web console single sign-on (Chromium)", () => {
  let idp: TestProvider;
  let dir: string;
  let consoleProc: CapstanProcess;
  let browser: Browser;

  beforeAll(async () => {
    idp = await startTestProvider({
      clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: ["http://127.0.0.1/ui/login/sso/callback"], application_type: "native" }],
      accounts: { alice: { email: "alice@example.com" }, carol: { email: "carol@example.com" }, mallory: { email: "mallory@example.com", email_verified: false } },
    });
    dir = await mkdtemp(join(tmpdir(), "capstan-web-sso-"));
    const secretFile = join(dir, "oidc-secret");
    await writeFile(secretFile, `${clientSecret}\n`, { mode: 0o600 });
    const port = await freePort();
    consoleProc = await startCapstan("console", [
      "-web", `127.0.0.1:${port}`,
      "-public-url", `http://127.0.0.1:${port}`,
      "-store", `sqlite://${dir}/state.db`,
      "-admin-token-file", join(dir, "admin-token"),
      "-oidc-issuer", idp.issuer,
      "-oidc-client-id", clientId,
      "-oidc-client-secret-file", secretFile,
      "-oidc-admins", "alice@example.com",
    ]);
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"], timeout: 30_000 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await consoleProc?.stop();
    await idp?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const signIn = async (login: string) => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${consoleProc.url}/ui/login`);
    await page.click("[data-testid=sso-login]");
    expect(new URL(page.url()).origin).toBe(idp.issuer);
    await page.fill('input[name="login"]', login);
    await page.fill('input[name="password"]', "any");
    await page.click('button[type="submit"]');
    return { context, page };
  };

  it("signs an -oidc-admins e-mail in as admin, with a session cookie and the Tokens page", async () => {
    const { context, page } = await signIn("alice");
    await page.waitForURL(`${consoleProc.url}/ui/`);
    expect(await page.locator("[data-testid=who]").textContent()).toMatch(/alice@example\.com\s*\(admin\)/);
    const session = (await context.cookies(consoleProc.url)).find((c) => c.name === "capstan_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // The flow's own cookie is gone once used.
    expect((await context.cookies(consoleProc.url)).some((c) => c.name === "capstan_sso")).toBe(false);
    await page.goto(`${consoleProc.url}/ui/tokens`);
    expect(await page.locator("table[data-testid=tokens]").textContent()).toContain("alice@example.com");
    await context.close();
  }, 60_000);

  it("signs another e-mail in as a user, and refuses an unverified e-mail", async () => {
    const carol = await signIn("carol");
    await carol.page.waitForURL(`${consoleProc.url}/ui/`);
    expect(await carol.page.locator("[data-testid=who]").textContent()).toMatch(/carol@example\.com\s*\(user\)/);
    await carol.context.close();

    const mallory = await signIn("mallory");
    await mallory.page.waitForURL(/\/ui\/login\/sso\/callback/);
    expect(await mallory.page.locator(".error").textContent()).toMatch(/e-mail/i);
    expect((await mallory.context.cookies(consoleProc.url)).some((c) => c.name === "capstan_session")).toBe(false);
    await mallory.context.close();
  }, 60_000);

  it("builds the callback on -public-url, whatever Host the request names", async () => {
    const location = await new Promise<string>((resolve, reject) => {
      const req = request(`${consoleProc.url}/ui/login/sso`, { headers: { host: "evil.example" } }, (res) => {
        res.resume();
        resolve(res.headers.location ?? "");
      });
      req.on("error", reject);
      req.end();
    });
    expect(new URL(location).searchParams.get("redirect_uri")).toBe(`${consoleProc.url}/ui/login/sso/callback`);
  });

  it("refuses a callback that no sign-in of this browser started", async () => {
    const res = await fetch(`${consoleProc.url}/ui/login/sso/callback?code=abc&state=forged`);
    expect(res.status).toBe(400);
    expect(res.headers.get("set-cookie") ?? "").not.toContain("capstan_session=cst_");
  });
});
