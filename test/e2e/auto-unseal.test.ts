// Restarts with no one at the keyboard (docs/secrets.md, "Auto-unseal"): a real `capstan up` on its
// embedded store and the real engines. The first start initializes the secrets service and keeps
// its key in DATA/unseal-key (0600); after kill -9 the next start unseals from it without any API
// call, and a group whose container is gone comes back with its secret file. With auto-unseal off
// the restarted service is sealed, and /readyz, `capstan get` and the web console say so. A key file readable by
// others stops the start, naming the file and its mode.
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster, type ContainerSummary } from "../../adapters/cluster/index.ts";
import { isPreviousContainer } from "../../controllers/shared/previous.ts";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const cluster = DockerCluster.fromSpec(services.cluster);
const app = uniqueName("au").replace(/[^a-z0-9]/g, "");
const group = `${app}.web.web`;
let dir: string;
let home: string;
let admin = "";
let up: CapstanProcess | undefined;

const upArgs = (more: string[] = []) => ["-data", dir, "-registry-web", "", "-cluster", services.cluster, "-update-wait", "1s", "-refresh-interval", "2s", ...more];

async function call(method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  const headers = { "access-token": admin, ...(body?.startsWith("{") && { "content-type": "application/json" }) };
  const res = await fetch(up!.url + path, { method, headers, body, signal: AbortSignal.timeout(20_000) });
  return { status: res.status, text: await res.text() };
}

async function containersOf(name: string): Promise<ContainerSummary[]> {
  return (await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } })).filter((c) => !isPreviousContainer(c));
}

/** The group's one container, once it runs and the group says so. */
async function runningContainer(): Promise<ContainerSummary | undefined> {
  const [c, ...more] = await containersOf(group);
  if (c?.state !== "running" || more.length > 0) return undefined;
  const g = await call("GET", `/api/podgroups?name=${group}`);
  return g.status === 200 && (JSON.parse(g.text) as { state: string }).state === "running" ? c : undefined;
}

/** /readyz's answer once it is 200 (ready means the API's view of the nodes is populated). */
async function ready(): Promise<{ details?: Record<string, string> }> {
  return pollUntil("capstan up ready", async () => {
    const res = await fetch(`${up!.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
    return res.status === 200 ? ((await res.json()) as { details?: Record<string, string> }) : undefined;
  }, 30_000);
}

async function removeContainers(): Promise<void> {
  for (const c of await containersOf(group)) await cluster.remove(c, { force: true, volumes: true });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "capstan-auto-unseal-"));
  home = mkdtempSync(join(tmpdir(), "capstan-home-"));
});

afterAll(async () => {
  if (up !== undefined && up.child.exitCode === null) await up.stop();
  for (const c of await containersOf(group).catch(() => [])) await cluster.remove(c, { force: true, volumes: true }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe("auto-unseal under capstan up", () => {
  it("first start initializes and keeps the key 0600; after kill -9 the restart unseals by itself and a group with a secret file comes back", async () => {
    up = await startCapstan("up", upArgs());
    const keyFile = join(dir, "unseal-key");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "secrets-root-token")).mode & 0o777).toBe(0o600);
    expect(up.log()).toContain("auto-unseal: initialized the secrets service");
    expect((await ready()).details).toBeUndefined();
    // Never logged: the key file's shares and the root token.
    for (const line of readFileSync(keyFile, "utf8").split("\n").filter((l) => l !== "" && !l.startsWith("#"))) expect(up.log()).not.toContain(line);
    expect(up.log()).not.toContain(readFileSync(join(dir, "secrets-root-token"), "utf8").trim());
    admin = readFileSync(join(dir, "admin-token"), "utf8").trim();
    expect(JSON.parse((await call("GET", "/v2/sys/status")).text)).toMatchObject({ initialized: true, sealed: false });

    const registered = await call("POST", "/api/v1/apps", JSON.stringify({ appname: app, maintainers: [`alice-${app}@example.com`] }));
    expect(registered.status, registered.text).toBeLessThan(300);
    expect((await call("PUT", `/v2/secrets?app=${app}&proc=${group}&path=secret.conf`, "s3cr3t")).status).toBe(200);
    const created = await fetch(`${up.url}/api/podgroups`, {
      method: "POST",
      headers: { "access-token": admin, "content-type": "application/json" },
      body: JSON.stringify({
        name: group,
        namespace: app,
        numInstances: 1,
        restartPolicy: "always",
        pod: { namespace: app, network: "none", containers: [{ image: services.testImage, command: ["sh", "-c", "grep -q s3cr3t /platform/app/secret.conf || exit 3; exec sleep 3600"], memoryLimit: 16 << 20, secretFiles: ["secret.conf"] }] },
      }),
    });
    expect(created.status, await created.text()).toBeLessThan(300);
    await pollUntil(`${group} running`, runningContainer, 60_000);

    up.child.kill("SIGKILL");
    await up.exited;
    await removeContainers();
    up = await startCapstan("up", upArgs());
    expect(up.log()).toContain("auto-unseal: unsealed from the unseal key file");
    await ready();
    expect(JSON.parse((await call("GET", "/v2/sys/status")).text)).toMatchObject({ sealed: false });
    // Recreated, and started only once Secret-sync installed the file (docs/secret-sync.md): the
    // command exits 3 without it.
    const c = await pollUntil(`${group} running again`, runningContainer, 60_000);
    expect(c.state).toBe("running");
  }, 180_000);

  it("with auto-unseal off the restarted service is sealed: /readyz details, capstan get and the web console say so", async () => {
    await up!.stop();
    up = await startCapstan("up", upArgs(["-unseal-key-file", ""]));
    expect(up.log()).toContain("auto-unseal is off");
    // Ready, with the seal shown.
    expect((await ready()).details).toEqual({ secrets: "secrets service sealed" });
    await removeContainers();
    const got = await pollUntil(
      "capstan get says sealed",
      async () => {
        const r = await runCapstan(["get", "podgroup", group], { HOME: home, CAPSTAN_SERVER: up!.url, CAPSTAN_TOKEN: admin, CAPSTAN_WEB: "" }, 30_000);
        return r.stdout.includes("waiting for secret files: secrets service sealed") ? r : undefined;
      },
      60_000,
    );
    expect(got.code).toBe(0);
    // The web console's page of the group shows its instances' last error (the session cookie holds the token).
    const page = await fetch(`${up!.url}/ui/podgroups/${group}`, { headers: { cookie: `capstan_session=${admin}` }, signal: AbortSignal.timeout(20_000) });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("waiting for secret files: secrets service sealed");
  }, 120_000);

  it("an operator's own init writes the file (capstan secrets init -unseal-key-file), and capstan secrets -unseal-key-file unseals from it at start", async () => {
    await up!.stop();
    const store = `sqlite://${join(dir, "secrets.db")}`;
    const keyFile = join(dir, "operator-unseal-key");
    const args = ["-store", store, "-cluster", services.cluster, "-auth", "none"];
    let secrets = await startCapstan("secrets", args);
    try {
      const init = await runCapstan(["secrets", "init", "-secrets", secrets.url, "-shares", "3", "-threshold", "2", "-unseal-key-file", keyFile], { HOME: home, CAPSTAN_TOKEN: "" });
      expect(init.code, init.stderr).toBe(0);
      expect(statSync(keyFile).mode & 0o777).toBe(0o600);
      const printed = [...init.stdout.matchAll(/^Unseal key \d: (\S+)$/gm)].map((m) => m[1]);
      expect(readFileSync(keyFile, "utf8").split("\n").filter((l) => l !== "" && !l.startsWith("#"))).toEqual(printed.slice(0, 2));
      expect(JSON.parse((await (await fetch(`${secrets.url}/v2/sys/status`)).text()))).toMatchObject({ sealed: false, threshold: 2 });
      await secrets.stop();
      secrets = await startCapstan("secrets", [...args, "-unseal-key-file", keyFile]);
      expect(JSON.parse((await (await fetch(`${secrets.url}/v2/sys/status`)).text()))).toMatchObject({ sealed: false });
    } finally {
      await secrets.stop();
    }
  }, 60_000);

  it("refuses to start on an unseal key file others may read, naming the file and its mode", async () => {
    const keyFile = join(dir, "unseal-key");
    chmodSync(keyFile, 0o644);
    const r = await runCapstan(["up", "-web", "127.0.0.1:0", ...upArgs()], { CAPSTAN_WEB: "", CAPSTAN_ADMIN_TOKEN: "" }, 60_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`unseal key file ${keyFile} has mode 0644: it must be 0600 or stricter`);
  }, 60_000);
});
