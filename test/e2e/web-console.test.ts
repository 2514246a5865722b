// The web console in a real Chromium (playwright-core with Debian's /usr/bin/chromium) against a
// real `capstan up` on the embedded store and the real engines: sign in, create a group from the
// page and watch it run without a reload, scale, logs (live, filter, download), a spec error
// shown at its line, a secret file added on the page and found in the container, another app's
// maintainer seeing none of it, deletion; and the security properties (escaping, CSRF, cookie
// flags, CSP). A screenshot of each main page goes to test-results/web-console/.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../cli/free-port.ts";
import { startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices } from "../helpers/services.ts";

const chromiumPath = process.env.CAPSTAN_CHROMIUM ?? "/usr/bin/chromium";
const shots = join(process.cwd(), "test-results", "web-console");
const run = promisify(execFile);

const app = "webui";
const group = `${app}.web.demo`;
const hostile = `<script>window.__pwned=1</script>"quoted' & <b>bold</b>`;
const secretPath = `conf/"q'<script>window.__pwned=2</script>.txt`;

describe("web console in Chromium", () => {
  const services = loadServices();
  let data: string;
  let up: CapstanProcess;
  let browser: Browser;
  let admin: string;
  let alice: string;
  let bob: string;
  let registryPort: number;

  const api = async (path: string, token: string, init: { method?: string; body?: unknown } = {}) => {
    const res = await fetch(`${up.url}${path}`, {
      method: init.method ?? "GET",
      headers: { authorization: `Bearer ${token}`, ...(init.body !== undefined && { "content-type": "application/json" }) },
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as unknown) : undefined };
  };

  const signIn = async (context: BrowserContext, token: string): Promise<Page> => {
    const page = await context.newPage();
    await page.goto(`${up.url}/ui/`);
    expect(new URL(page.url()).pathname).toBe("/ui/login");
    await page.fill("input[name=token]", token);
    await Promise.all([page.waitForURL(`${up.url}/ui/`), page.click("button[type=submit]")]);
    return page;
  };

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    data = mkdtempSync(join(tmpdir(), "capstan-webui-"));
    // Fixed ports: the registry's token realm is -web's address, which port 0 would not name.
    registryPort = await freePort();
    up = await startCapstan("up", ["-web", `127.0.0.1:${await freePort()}`, "-registry-web", `127.0.0.1:${registryPort}`, "-data", data, "-cluster", services.cluster, "-history", "1m"]);
    admin = readFileSync(join(data, "admin-token"), "utf8").trim();
    expect((await api("/api/v1/apps", admin, { method: "POST", body: { appname: app, maintainers: ["alice@example.com"] } })).status).toBe(201);
    expect((await api("/api/v1/apps", admin, { method: "POST", body: { appname: "other", maintainers: ["bob@example.com"] } })).status).toBe(201);
    alice = ((await api("/api/v1/tokens", admin, { method: "POST", body: { user: "alice@example.com" } })).json as { token: string }).token;
    bob = ((await api("/api/v1/tokens", admin, { method: "POST", body: { user: "bob@example.com" } })).json as { token: string }).token;
    // capstan up initialized and unsealed the secrets service itself (docs/secrets.md, "Auto-unseal").
    expect(((await api("/v2/sys/status", admin)).json as { sealed: boolean }).sealed).toBe(false);
    browser = await chromium.launch({
      executablePath: chromiumPath,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
      timeout: 30_000,
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    if (up !== undefined) {
      await api(`/api/podgroups?name=${group}`, admin, { method: "DELETE" }).catch(() => undefined);
      await pollUntil("the group gone", async () => (await api(`/api/podgroups?name=${group}`, admin)).status === 404, 60_000, 300).catch(() => undefined);
      await up.stop();
    }
    rmSync(data, { recursive: true, force: true });
  }, 90_000);

  it("signs in, creates a group that runs without a reload, scales it, reads its logs, shows a spec error at its line, installs a secret file, and deletes it", async () => {
    const context = await browser.newContext();
    const page = await signIn(context, alice);
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("console", (m) => {
      // A page answered 400 on purpose (the spec error, a wrong confirmation) is logged as a failed load.
      if (m.type() === "error" && !m.text().includes("status of 400")) pageErrors.push(m.text());
    });
    await expect(page.locator("[data-testid=who]").textContent()).resolves.toContain("alice@example.com");
    await page.screenshot({ path: join(shots, "overview.png"), fullPage: true });

    // The session cookie: HttpOnly, SameSite=Strict, and a session token of its own, not the pasted one.
    const session = (await context.cookies()).find((c) => c.name === "capstan_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    expect(session!.value).not.toBe(alice);
    expect((await api("/api/v1/whoami", session!.value)).json).toMatchObject({ user: "alice@example.com", role: "user" });

    // A secret file first (the group's container waits for it), added on the secrets page.
    await page.goto(`${up.url}/ui/apps/${app}/secrets`);
    await page.fill("[data-testid=secret-proc]", group);
    await page.fill("[data-testid=secret-path-input]", secretPath);
    await page.fill("[data-testid=secret-content-input]", "s3cret-from-the-browser\n");
    await Promise.all([page.waitForURL(/done=saved/), page.click("[data-testid=save-secret]")]);
    // The path, with quotes and tags, is text; the content stays hidden until revealed.
    expect(await page.locator("[data-testid=secret-path]").first().textContent()).toBe(secretPath);
    expect(await page.locator("table[data-testid=secrets] script").count()).toBe(0);
    expect(await page.content()).not.toContain("s3cret-from-the-browser");
    await page.click("table[data-testid=secrets] button:has-text('Reveal')");
    await expect(page.locator("[data-testid=secret-content]").textContent()).resolves.toBe("s3cret-from-the-browser\n");
    await page.screenshot({ path: join(shots, "secrets.png"), fullPage: true });

    // Create the group from YAML; its page follows it to running with no reload.
    await page.goto(`${up.url}/ui/podgroups/new`);
    const spec = [
      `name: ${group}`,
      `namespace: ${app}`,
      "numInstances: 1",
      "restartPolicy: always",
      "pod:",
      `  namespace: ${app}`,
      `  annotation: ${JSON.stringify(hostile)}`,
      "  containers:",
      `    - image: ${services.testImage}`,
      "      command: [sh, -c, 'echo hello-from-webui; echo oops-on-stderr >&2; while true; do echo tick; sleep 1; done']",
      "      memoryLimit: 16777216",
      `      secretFiles: [${JSON.stringify(secretPath)}]`,
    ].join("\n");
    await page.fill("[data-testid=spec]", spec);
    await Promise.all([page.waitForURL(new RegExp(`/ui/podgroups/${group.replace(/\./g, "\\.")}\\?done=created`)), page.click("[data-testid=create]")]);
    let navigations = 0;
    page.on("framenavigated", () => navigations++);
    await page.locator("[data-testid=group-state]", { hasText: /^running$/ }).waitFor({ timeout: 90_000 });
    expect(navigations).toBe(0);
    // The annotation is text: no script ran, no element was made from it.
    expect(await page.locator("[data-testid=annotation]").textContent()).toBe(hostile);
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    expect(await page.locator("[data-testid=annotation] b").count()).toBe(0);
    await page.screenshot({ path: join(shots, "podgroup.png"), fullPage: true });

    // The secret file is in the container, with the content written on the page.
    const status = (await api(`/api/podgroups?name=${group}`, alice)).json as { pods: { node: string; containers: { id: string }[] }[] };
    const pod0 = status.pods[0]!;
    const { stdout } = await run("docker", ["-H", services.engines[pod0.node]!, "exec", pod0.containers[0]!.id, "cat", `/platform/app/${secretPath}`], { timeout: 20_000 });
    expect(stdout).toBe("s3cret-from-the-browser\n");

    // Scale to 2 from the page; the table shows two running instances without a reload.
    await page.fill("[data-testid=num-instances]", "2");
    await Promise.all([page.waitForURL(/done=scaled/), page.click("[data-testid=scale]")]);
    navigations = 0;
    await pollUntil("two running instances on the page", async () => (await page.locator("table[data-testid=instances] tbody tr td.state-running").count()) === 2, 90_000, 500);
    expect(navigations).toBe(0);

    // The overview counts it: 2 of 2 instances running, in the list and the summary.
    await page.goto(`${up.url}/ui/`);
    const row = page.locator("table[data-testid=podgroups] tr", { hasText: group });
    expect(await row.locator("td.num").first().textContent()).toBe("2 / 2");
    expect(await page.locator("[data-testid=summary]").textContent()).toContain("2/2");
    await page.screenshot({ path: join(shots, "overview-running.png"), fullPage: true });

    // A terminal in the container (xterm.js over the exec WebSocket, the session cookie as credential).
    // A link to the page runs nothing (not even a command named in its URL): Connect does.
    await page.goto(`${up.url}/ui/podgroups/${group}/exec?instance=1&cmd=touch%20/tmp/linked`);
    expect(await page.locator("[data-testid=exec-command]").inputValue()).toBe("sh");
    expect(await page.locator("[data-testid=exec-state]").textContent()).toBe("not connected"); // the page's script has run (load)
    await page.click("[data-testid=exec-connect]");
    await page.locator("[data-testid=exec-state]", { hasText: /^connected$/ }).waitFor({ timeout: 20_000 });
    await page.locator("#terminal .xterm-helper-textarea").focus();
    await page.keyboard.type("echo exec-$((6*7)); exit 7\n");
    await page.locator("#terminal .xterm-rows", { hasText: "exec-42" }).waitFor({ timeout: 20_000 });
    await page.locator("[data-testid=exec-state]", { hasText: "exited with code 7" }).waitFor({ timeout: 20_000 });
    await page.screenshot({ path: join(shots, "exec.png"), fullPage: true });
    await page.goto(`${up.url}/ui/podgroups/${group}`);

    // An invalid spec: the API's error, next to the line of the field.
    const yaml = await page.locator("[data-testid=spec]").inputValue();
    const bad = yaml.replace(/memoryLimit: \d+/, "memoryLimit: -5");
    expect(bad).not.toBe(yaml);
    await page.fill("[data-testid=spec]", bad);
    await page.click("[data-testid=save-spec]");
    const problem = page.locator('.field-errors li[data-field$="containers[0].memoryLimit"]');
    await problem.waitFor();
    const line = bad.split("\n").findIndex((l) => l.includes("memoryLimit: -5")) + 1;
    expect(await problem.textContent()).toContain(`line ${line}`);
    await page.screenshot({ path: join(shots, "spec-error.png"), fullPage: true });
    // Nothing changed: still pod version 1.
    expect(((await api(`/api/podgroups?name=${group}`, alice)).json as { spec: { pod: { version: number } } }).spec.pod.version).toBe(1);

    // Logs of the whole group, live; the filter hides other lines; pause holds new ones.
    await page.goto(`${up.url}/ui/podgroups/${group}/logs`);
    await page.locator("#log", { hasText: "hello-from-webui" }).waitFor({ timeout: 30_000 });
    expect(await page.locator("#log .stderr", { hasText: "oops-on-stderr" }).count()).toBeGreaterThan(0);
    await page.fill("[data-testid=log-filter]", "hello-from");
    await pollUntil("only matching lines shown", async () => page.evaluate('[...document.querySelectorAll("#log > div")].filter((d) => !d.hidden).every((d) => d.textContent.includes("hello-from"))'), 5_000);
    await page.fill("[data-testid=log-filter]", "");
    await page.click("[data-testid=log-pause]");
    const held = await page.locator("#log > div").count();
    await new Promise((r) => setTimeout(r, 2_500)); // the container prints every second: lines arrive while paused
    expect(await page.locator("#log > div").count()).toBe(held);
    await page.click("[data-testid=log-pause]");
    await pollUntil("held lines shown after resume", async () => (await page.locator("#log > div").count()) > held, 10_000);
    await page.screenshot({ path: join(shots, "logs.png"), fullPage: true });
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("[data-testid=log-download]")]);
    const file = await download.path();
    expect(readFileSync(file, "utf8")).toContain("hello-from-webui");

    // Nodes page.
    await page.goto(`${up.url}/ui/nodes`);
    for (const node of Object.keys(services.engines)) await page.locator("table[data-testid=nodes] td", { hasText: node }).first().waitFor();
    await page.screenshot({ path: join(shots, "nodes.png"), fullPage: true });

    // A new version from the editor, then a one-click rollback to version 1 (which becomes version 3).
    await page.goto(`${up.url}/ui/podgroups/${group}`);
    const current = await page.locator("[data-testid=spec]").inputValue();
    await page.fill("[data-testid=spec]", current.replace(/^annotation: .*$/m, "annotation: second version"));
    await Promise.all([page.waitForURL(/done=updated/), page.click("[data-testid=save-spec]")]);
    expect(await page.locator("table[data-testid=history] tbody tr").count()).toBe(2);
    await page.screenshot({ path: join(shots, "history.png"), fullPage: true });
    await Promise.all([page.waitForURL(/done=rolledback/), page.click("[data-testid=rollback-1]")]);
    const rolled = (await api(`/api/podgroups?name=${group}`, alice)).json as { spec: { pod: { version: number; annotation: string } } };
    expect(rolled.spec.pod).toMatchObject({ version: 3, annotation: hostile });
    expect(await page.locator("table[data-testid=history] tbody tr").count()).toBe(3);
    // Restart all, one at a time: a rolling restart request (the rollout itself is the controller's, tested there).
    await Promise.all([page.waitForURL(/done=restarted/), page.click("[data-testid=restart]")]);
    const restarted = (await api(`/api/podgroups?name=${group}`, alice)).json as { spec: { restartedAt?: string; pod: { version: number } } };
    expect(restarted.spec.restartedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(restarted.spec.pod.version).toBe(3);

    // Delete, with the typed confirmation.
    await page.fill("[data-testid=delete-confirm]", "wrong");
    await page.click("[data-testid=delete]");
    await page.locator(".error", { hasText: "to confirm the deletion" }).waitFor();
    await page.fill("[data-testid=delete-confirm]", group);
    await Promise.all([page.waitForURL(/done=deleted/), page.click("[data-testid=delete]")]);
    await pollUntil("the group deleted", async () => (await api(`/api/podgroups?name=${group}`, admin)).status === 404, 90_000, 300);
    expect(pageErrors).toEqual([]);
    await context.close();
  }, 300_000);

  it("lists the registry's repositories and tags, and deletes a tag, as the registry allows", async () => {
    for (const tag of ["v1", "v2"]) {
      await run(
        "skopeo",
        ["copy", "--src-daemon-host", Object.values(services.engines)[0]!, "--dest-tls-verify=false", "--dest-creds", `alice@example.com:${alice}`, `docker-daemon:${services.testImage}`, `docker://127.0.0.1:${registryPort}/${app}:${tag}`],
        { timeout: 120_000 },
      );
    }
    const context = await browser.newContext();
    const page = await signIn(context, alice);
    await page.click("header nav a:has-text('Registry')");
    await page.click(`table[data-testid=repositories] a:has-text('${app}')`);
    await page.locator("table[data-testid=tags] tr[data-tag=v2]").waitFor();
    await page.screenshot({ path: join(shots, "registry.png"), fullPage: true });
    await Promise.all([page.waitForURL(/done=deleted/), page.click("[data-testid=delete-tag-v1]")]);
    expect(await page.locator("table[data-testid=tags] tr[data-tag]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-tag")))).toEqual(["v2"]);
    await context.close();
    // Another app's maintainer may not read it.
    const other = await browser.newContext();
    const bobPage = await signIn(other, bob);
    const res = await bobPage.goto(`${up.url}/ui/registry/repository?name=${app}`);
    expect(res?.status()).toBe(403);
    expect(await bobPage.locator("[data-testid=delete-tag-v2]").count()).toBe(0);
    await other.close();
  }, 300_000);

  it("shows a maintainer of another app none of it, and hides what a user may not use", async () => {
    expect((await api("/api/podgroups", admin, { method: "POST", body: { name: `${app}.web.hidden`, namespace: app, numInstances: 0, restartPolicy: "never", pod: { namespace: app, containers: [{ image: services.testImage }] } } })).status).toBe(202);
    const context = await browser.newContext();
    const page = await signIn(context, bob);
    expect(await page.locator("table[data-testid=podgroups]").textContent()).not.toContain(app);
    const res = await page.goto(`${up.url}/ui/podgroups/${app}.web.hidden`);
    expect(res?.status()).toBe(403);
    // No Tokens link for a user; the Tokens page itself is refused by the console API.
    expect(await page.locator("header nav a", { hasText: "Tokens" }).count()).toBe(0);
    await page.goto(`${up.url}/ui/tokens`);
    expect(await page.locator(".error").textContent()).toMatch(/admin/);
    await page.goto(`${up.url}/ui/apps`);
    expect(await page.locator("table[data-testid=apps]").textContent()).toContain("other");
    expect(await page.locator("table[data-testid=apps]").textContent()).not.toContain(app);
    await context.close();
    await api(`/api/podgroups?name=${app}.web.hidden`, admin, { method: "DELETE" });
  }, 120_000);

  it("refuses a mutating request without the CSRF token or from another origin, and sends its CSP", async () => {
    const context = await browser.newContext();
    const page = await signIn(context, alice);
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const form = new URLSearchParams({ num_instances: "3" }).toString();
    const noToken = await fetch(`${up.url}/ui/podgroups/${app}.web.x/scale`, { method: "POST", headers: { cookie, "content-type": "application/x-www-form-urlencoded" }, body: form });
    expect(noToken.status).toBe(403);
    const csrf = await page.locator("input[name=_csrf]").first().inputValue();
    const crossSite = await fetch(`${up.url}/ui/podgroups/${app}.web.x/scale`, {
      method: "POST",
      headers: { cookie, origin: "http://evil.example", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ num_instances: "3", _csrf: csrf }).toString(),
    });
    expect(crossSite.status).toBe(403);
    // The session cookie opens an exec socket only from a page of this origin, with the session's CSRF token.
    const { WebSocket } = await import("ws");
    const upgrade = (query: string, origin: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`${up.url.replace("http", "ws")}/api/podgroups/exec?name=${app}.web.x&cmd=sh${query}`, { headers: { cookie, origin } });
        ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.on("open", () => {
          resolve(101);
          ws.close();
        });
        ws.on("error", () => undefined);
      });
    expect(await upgrade(`&csrf_token=${csrf}`, "http://evil.example")).toBe(401);
    expect(await upgrade("", up.url)).toBe(401);
    expect(await upgrade("&csrf_token=forged", up.url)).toBe(401);
    // With both, the cookie authenticates (the group does not exist: 404, after authentication).
    expect(await upgrade(`&csrf_token=${csrf}`, up.url)).toBe(404);
    // Signing out revokes the session's token (and not the token the user signed in with).
    const sessionToken = (await context.cookies()).find((c) => c.name === "capstan_session")!.value;
    expect((await api("/api/v1/whoami", sessionToken)).status).toBe(200);
    await Promise.all([page.waitForURL(`${up.url}/ui/login`), page.click("header button:has-text('Sign out')")]);
    expect((await api("/api/v1/whoami", sessionToken)).status).toBe(401);
    expect((await api("/api/v1/whoami", alice)).status).toBe(200);
    // A sign-in body is refused before it is read when the form was never loaded, and when it is too big.
    expect((await fetch(`${up.url}/ui/login`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "token=x" })).status).toBe(403);
    const big = await fetch(`${up.url}/ui/login`, { method: "POST", headers: { cookie: "capstan_login=abc", "content-type": "application/x-www-form-urlencoded" }, body: `token=${"x".repeat(64 << 10)}` });
    expect(big.status).toBe(413);
    // No session: the login page, never the page.
    const anonymous = await fetch(`${up.url}/ui/podgroups`, { redirect: "manual" });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get("location")).toBe("/ui/login");
    const csp = anonymous.headers.get("content-security-policy") ?? "";
    const scriptSrc = /script-src ([^;]*)/.exec(csp)?.[1] ?? "";
    expect(scriptSrc).toBe("'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    await context.close();
  }, 60_000);
});
