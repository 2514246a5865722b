// `capstan login CLUSTER -sso` end to end: a real `capstan console` process with -oidc-*, a real
// OpenID provider, and the real `capstan login -sso` process, whose printed URL the test follows
// through the provider's login like a browser. The CLI ends with a token saved in
// ~/.capstan/config.yaml that `capstan whoami` accepts; a login the user cancels fails with the
// provider's error (docs/cli.md, docs/console.md#single-sign-on).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capstanBin, runCapstan, startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { browse, CookieJar, startTestProvider, type TestProvider } from "../../helpers/oidc-provider.ts";

const clientId = "capstan-console";
const clientSecret = randomBytes(24).toString("base64url");

let idp: TestProvider;
let dir: string;
let home: string;
let consoleProc: CapstanProcess;

beforeAll(async () => {
  idp = await startTestProvider({
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: ["http://127.0.0.1/callback"], application_type: "native" }],
    accounts: { alice: { email: "alice@example.com" }, bob: { email: "bob@example.com" } },
  });
  dir = await mkdtemp(join(tmpdir(), "capstan-sso-cli-"));
  home = join(dir, "home");
  const secretFile = join(dir, "oidc-secret");
  await writeFile(secretFile, `${clientSecret}\n`, { mode: 0o600 });
  consoleProc = await startCapstan("console", [
    "-store", `sqlite://${dir}/state.db`,
    "-admin-token-file", join(dir, "admin-token"),
    "-oidc-issuer", idp.issuer,
    "-oidc-client-id", clientId,
    "-oidc-client-secret-file", secretFile,
    "-oidc-admins", "alice@example.com",
    "-sso-token-ttl", "2h",
  ]);
});

afterAll(async () => {
  await consoleProc?.stop();
  await idp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `capstan login local -url CONSOLE -sso -no-browser`, its authorization URL once printed, and its end. */
function startLogin(): { url: Promise<string>; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(capstanBin, ["login", "local", "-url", consoleProc.url, "-sso", "-no-browser", "-sso-timeout", "30s"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HOME: home, CAPSTAN_TOKEN: "", DISPLAY: "" },
  });
  let stdout = "";
  let stderr = "";
  let found: (url: string) => void;
  const url = new Promise<string>((resolve) => (found = resolve));
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    const m = /^ {2}(https?:\/\/\S+)$/m.exec(stderr);
    if (m) found(m[1]!);
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 50_000);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => {
      clearTimeout(timer);
      found(""); // an early exit: no URL
      resolve({ code, stdout, stderr });
    }),
  );
  return { url, done };
}

describe("capstan login -sso", () => {
  it("logs in through the provider and saves a token capstan whoami accepts", async () => {
    const login = startLogin();
    const url = await login.url;
    expect(url).toMatch(new RegExp(`^${idp.issuer}/auth\\?`));
    expect(new URL(url).searchParams.get("redirect_uri")).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    // A callback without this login's state is turned away, and the CLI goes on waiting.
    const callback = new URL(url).searchParams.get("redirect_uri")!;
    const stray = await fetch(`${callback}?code=x&state=${encodeURIComponent("v1.not.this")}`);
    expect(stray.status).toBe(400);
    expect((await fetch(`${new URL(callback).origin}/other`)).status).toBe(404);
    const r = await browse(new CookieJar(), url, { login: { sub: "alice" } });
    expect(r.finalUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
    expect(r.final.status).toBe(200);
    expect(await r.final.text()).toContain("You may close this page");
    const end = await login.done;
    expect(end.code, end.stderr).toBe(0);
    expect(end.stderr).toContain("open this URL in your browser");
    expect(end.stdout).toMatch(/logged in to local as alice@example\.com \(role admin, token [0-9a-f]{12}, expires /);
    const config = join(home, ".capstan", "config.yaml");
    expect((await stat(config)).mode & 0o777).toBe(0o600);
    const saved = await readFile(config, "utf8");
    expect(saved).toMatch(/token: cst_[0-9a-f]{12}_/);
    expect(saved).not.toContain(clientSecret);
    // The console's log names the login, never the token or the secret.
    const token = /token: (cst_\S+)/.exec(saved)![1]!;
    expect(consoleProc.log()).toContain("sso login: token created");
    expect(consoleProc.log()).not.toContain(token.slice(17));
    expect(consoleProc.log()).not.toContain(clientSecret);

    const me = await runCapstan(["whoami"], { HOME: home, CAPSTAN_TOKEN: "" });
    expect(me.code, me.stderr).toBe(0);
    expect(me.stdout).toMatch(/^user alice@example\.com \(token [0-9a-f]{12}\), role admin, apps: all, expires /);
  });

  it("fails with the provider's error when the user cancels the login", async () => {
    const login = startLogin();
    const url = await login.url;
    expect(url).not.toBe("");
    const r = await browse(new CookieJar(), url, { login: { sub: "bob", deny: true } });
    expect(r.finalUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
    expect(r.final.status).toBe(403);
    const end = await login.done;
    expect(end.code).toBe(1);
    expect(end.stderr).toMatch(/capstan login: the identity provider refused the login: access_denied/);
  });

  it("says so when the console has no single sign-on", async () => {
    const plain = await startCapstan("console", ["-store", `sqlite://${dir}/plain.db`, "-admin-token-file", join(dir, "plain-admin-token")]);
    try {
      const end = await runCapstan(["login", "plain", "-url", plain.url, "-sso", "-no-browser"], { HOME: home, CAPSTAN_TOKEN: "", DISPLAY: "" }, 30_000);
      expect(end.code).toBe(1);
      expect(end.stderr).toMatch(/capstan login: NotFound: single sign-on is not configured on this console: start it with -oidc-issuer/);
    } finally {
      await plain.stop();
    }
  });
});
