// The pull step (docs/podgroup-controller.md, "Images"; docs/registry.md, "How the platform
// pulls") against a real registry and the real engines. A `capstan registry` without auth: a group
// pinned to n2 with an image n2 does not have runs once the controller pulled it, and a group whose
// image the registry does not have reports the failed pull and creates nothing. Then `capstan up`
// with token auth and no anonymous pull: an admin pushes an app's image, and the controllers pull
// it as their own service identity (the sync token up made in DATA/controllers-token, which stays
// in up's process: the engine gets a registry token that pulls that one repository); a missing
// image of that registry shows its failed pull in `capstan get podgroup`. And what the real engine
// does with such a token: it sends it as a Bearer token to the registry and never to a realm a 401
// names (a username and password, it does send there: the finding this design closes).
//
// Only 127.0.0.1 traffic; the engines treat 127.0.0.0/8 registries as insecure (plain HTTP).
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../cli/free-port.ts";
import { capstanBin, startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { groupSpec, Harness, serve, services } from "./harness.ts";

const run = promisify(execFile);
const h = new Harness({ restartBackoff: { initialMs: 500, maxMs: 2_000 } });
const dir = mkdtempSync(join(tmpdir(), "capstan-image-pull-"));
const processes: CapstanProcess[] = [];
/** Image references this file put on an engine (untagged on every engine afterwards). */
const references = new Set<string>();
/** PodGroups `capstan up` ran, whose containers are removed afterwards. */
const upGroups: string[] = [];
const n1 = services.engines.n1!;
const n2 = services.engines.n2!;

function docker(endpoint: string, args: string[]): Promise<{ stdout: string }> {
  return run("docker", ["-H", endpoint, ...args], { timeout: 60_000 });
}

/** The test image from n1's engine into the registry, as `dest` (host:port/repo:tag). */
async function push(dest: string, creds?: string): Promise<void> {
  references.add(dest);
  await run(
    "skopeo",
    ["copy", "--src-daemon-host", n1, "--dest-tls-verify=false", ...(creds ? ["--dest-creds", creds] : []), `docker-daemon:${services.testImage}`, `docker://${dest}`],
    { timeout: 120_000 },
  );
}

/** Make sure n2 has no image by that reference (untag only: the test image itself stays). */
async function absentOnN2(reference: string): Promise<void> {
  references.add(reference);
  await docker(n2, ["rmi", "-f", reference]).catch(() => undefined);
  expect(await h.cluster.hasImage("n2", reference)).toBe(false);
}

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await h.cleanup();
  for (const g of upGroups) {
    const cs = await h.cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${g}`] } });
    await Promise.all(cs.map((c) => h.cluster.remove(c, { force: true, volumes: true }).catch(() => undefined)));
  }
  for (const endpoint of Object.values(services.engines)) {
    for (const r of references) await docker(endpoint, ["rmi", "-f", r]).catch(() => undefined);
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("pulling images before creating containers", () => {
  let registry = "";

  beforeAll(async () => {
    const root = join(dir, "registry");
    const config = join(dir, "registry.yaml");
    writeFileSync(config, `version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: ${root}\nhttp:\n  addr: 127.0.0.1:5000\n`);
    const p = await startCapstan("registry", ["-config", config]);
    processes.push(p);
    registry = p.url.replace(/^http:\/\//, "");
  });

  it("pulls a missing image onto the pinned node, then the group runs there", async () => {
    const image = `${registry}/pulltest/busybox:v1`;
    await push(image);
    await absentOnN2(image);
    const name = h.name("pull");
    await h.put(groupSpec(name, { container: { image, command: serve }, pod: { filters: ["node==n2"] } }));
    const [pod] = await h.converged(name, 1, 1, 90_000);
    expect(pod!.c.node).toBe("n2");
    expect(pod!.c.image).toBe(image);
    expect(await h.cluster.hasImage("n2", image)).toBe(true);
    expect((await h.status(name))!.pods[0]!.lastError).toBe("");
  });

  it("reports a failed pull naming the image and the registry's answer, and creates nothing", async () => {
    const image = `${registry}/pulltest/nope:v1`;
    await absentOnN2(image);
    const name = h.name("nope");
    await h.put(groupSpec(name, { container: { image, command: serve }, pod: { filters: ["node==n2"] } }));
    const s = await h.until(
      `${name}: the failed pull in its status`,
      async () => {
        const st = await h.status(name);
        return st?.pods[0]?.lastError.startsWith("image pull failed") ? st : undefined;
      },
      60_000,
    );
    const escaped = image.replace(/[.]/g, "\\.");
    expect(s.pods[0]!.lastError).toMatch(new RegExp(`^image pull failed: ${escaped} on n2: .*(not found|unknown)`, "i"));
    expect(s.pods[0]!.state).toBe("failed");
    expect(s.state).toBe("failed");
    expect(s.lastError).toContain(`instance 1: image pull failed: ${image} on n2`);
    expect(await h.actual(name)).toEqual([]);
    expect(await h.cluster.hasImage("n2", image)).toBe(false);
  });
});

describe("capstan up: the controllers pull as the console's service identity", () => {
  const data = join(dir, "up");
  let up: CapstanProcess;
  let regHost = "";
  let admin = "";
  const app = `pull${Date.now().toString(36)}`;

  const api = async (method: string, path: string, body?: unknown): Promise<Response> =>
    fetch(`${up.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });

  const group = (name: string, image: string) => ({
    name,
    namespace: app,
    numInstances: 1,
    restartPolicy: "always",
    pod: { namespace: app, network: "none", filters: ["node==n2"], containers: [{ image, command: serve }] },
  });

  beforeAll(async () => {
    const regPort = await freePort();
    regHost = `127.0.0.1:${regPort}`;
    // A port of its own for -web too: the realm up publishes for the registry is made from it.
    const web = `127.0.0.1:${await freePort()}`;
    up = await startCapstan("up", ["-web", web, "-data", data, "-cluster", services.cluster, "-registry-web", regHost, "-update-wait", "1s", "-refresh-interval", "2s"]);
    processes.push(up);
    admin = readFileSync(join(data, "admin-token"), "utf8").trim();
    // The registry listener answers (401: token auth is on).
    await h.until("up's registry", async () => (await fetch(`http://${regHost}/v2/`).catch(() => undefined))?.status === 401, 30_000);
  });

  /** A registry token from up's token endpoint, asked as the controllers' service identity. */
  const registryToken = async (scope: string): Promise<string> => {
    const token = readFileSync(join(data, "controllers-token"), "utf8").trim();
    const res = await fetch(`${up.url}/api/v1/authorize/registry/?service=capstan-registry&scope=${encodeURIComponent(scope)}`, {
      headers: { authorization: `Basic ${Buffer.from(`capstan-controllers:${token}`).toString("base64")}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { token: string }).token;
  };

  it("made a sync token for its controllers, kept in DATA/controllers-token with mode 0600", async () => {
    expect(statSync(join(data, "controllers-token")).mode & 0o777).toBe(0o600);
    const token = readFileSync(join(data, "controllers-token"), "utf8").trim();
    const who = await fetch(`${up.url}/api/v1/whoami`, { headers: { authorization: `Bearer ${token}` } });
    expect(who.status).toBe(200);
    expect(await who.json()).toMatchObject({ user: "capstan-controllers", role: "sync" });
  });

  it("pulls an app's image pushed by an admin, with anonymous pull off", async () => {
    expect((await api("POST", "/api/v1/apps", { appname: app, maintainers: ["admin@example.com"] })).status).toBe(201);
    const image = `${regHost}/${app}/web:v1`;
    await push(image, `admin:${admin}`);
    // Nobody without credentials may pull it.
    const anonymous = await fetch(`${up.url}/api/v1/authorize/registry/?service=capstan-registry&scope=repository:${app}/web:pull`);
    expect(anonymous.status).toBe(401);
    expect((await fetch(`http://${regHost}/v2/${app}/web/manifests/v1`)).status).toBe(401);
    await absentOnN2(image);

    const name = `${app}.web`;
    upGroups.push(name);
    expect((await api("POST", "/api/podgroups", group(name, image))).status).toBe(202);
    await h.until(
      `${name} running on n2`,
      async () => {
        const res = await api("GET", `/api/podgroups?name=${name}`);
        if (res.status !== 200) return undefined;
        const g = (await res.json()) as { state: string; pods: { state: string; node: string; lastError: string }[] };
        return g.state === "running" && g.pods[0]?.state === "running" && g.pods[0].node === "n2" ? g : undefined;
      },
      90_000,
      250,
    );
    expect(await h.cluster.hasImage("n2", image)).toBe(true);
    const cs = await h.cluster.listContainers("n2", { filters: { label: [`io.capstan.podgroup=${name}`] } });
    expect(cs.map((c) => [c.image, c.state])).toEqual([[image, "running"]]);
    expect(up.log()).toMatch(/"registryUser":"capstan-controllers"[^\n]*"msg":"pulling image"/);
    // The engine was given a token that pulls this repository, not the console access token.
    const line = up.log().split("\n").find((l) => l.includes('"msg":"pulling image"') && l.includes(`"image":"${image}"`));
    expect(line).toContain(`"registryScope":"repository:${app}/web:pull"`);
    expect(up.log()).not.toContain(readFileSync(join(data, "controllers-token"), "utf8").trim());
  });

  it("the real engine pulls with a registry token for that repository only (registrytoken in X-Registry-Auth)", async () => {
    const image = `${regHost}/${app}/web:v1`;
    await absentOnN2(image);
    const other = await registryToken(`repository:${app}/other:pull`);
    expect(decodeJwt(other).access).toEqual([{ type: "repository", name: `${app}/other`, actions: ["pull"] }]);
    await expect(h.cluster.pullImage("n2", image, { auth: { registrytoken: other, serveraddress: regHost } })).rejects.toThrow(/denied|unauthorized|insufficient_scope|authentication required/i);
    await expect(h.cluster.pullImage("n2", image)).rejects.toThrow(/denied|unauthorized|authentication required/i);
    expect(await h.cluster.hasImage("n2", image)).toBe(false);
    const mine = await registryToken(`repository:${app}/web:pull`);
    expect(decodeJwt(mine).access).toEqual([{ type: "repository", name: `${app}/web`, actions: ["pull"] }]);
    await h.cluster.pullImage("n2", image, { auth: { registrytoken: mine, serveraddress: regHost } });
    expect(await h.cluster.hasImage("n2", image)).toBe(true);
  });

  it("shows a failed pull in capstan get podgroup", async () => {
    const name = `${app}.missing`;
    upGroups.push(name);
    const image = `${regHost}/${app}/missing:v1`;
    expect((await api("POST", "/api/podgroups", group(name, image))).status).toBe(202);
    const home = mkdtempSync(join(dir, "home-"));
    const get = async () =>
      (await run(capstanBin, ["get", "podgroup", name], { timeout: 30_000, env: { ...process.env, HOME: home, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: admin } })).stdout;
    const out = await h.until(
      `${name}: the failed pull in capstan get`,
      async () => {
        const text = await get();
        return text.includes("image pull failed") ? text : undefined;
      },
      60_000,
      500,
    );
    const instance = out.split("\n").find((l) => /^1 /.test(l));
    expect(instance).toMatch(new RegExp(`^1 +failed +.*image pull failed: ${image.replace(/[.]/g, "\\.")} on n2: `));
    expect(await h.cluster.listContainers("n2", { all: true, filters: { label: [`io.capstan.podgroup=${name}`] } })).toEqual([]);
  });
});

describe("the engine and a registry token: Bearer to the registry, nothing to the realm a 401 names", () => {
  /** Requests a server saw: method, path and Authorization header. */
  type Seen = { path: string; authorization: string | undefined }[];
  let registry: Server;
  let realm: Server;
  const atRegistry: Seen = [];
  const atRealm: Seen = [];
  let regHost = "";

  const listen = async (handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Server> => {
    const server = createServer(handler);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return server;
  };
  const port = (s: Server) => (s.address() as AddressInfo).port;

  beforeAll(async () => {
    // Whoever answers at the registry's address: every request 401 but a Bearer one, whose
    // manifest is unknown; its challenge names a realm of its own, which would collect credentials.
    realm = await listen((req, res) => {
      atRealm.push({ path: req.url ?? "", authorization: req.headers.authorization });
      res.writeHead(200, { "content-type": "application/json" }).end('{"token":"collected","access_token":"collected","expires_in":60}');
    });
    registry = await listen((req, res) => {
      atRegistry.push({ path: req.url ?? "", authorization: req.headers.authorization });
      const bearer = /^Bearer /.test(req.headers.authorization ?? "");
      if (req.url?.startsWith("/v2/") && req.url !== "/v2/" && bearer) {
        res.writeHead(404, { "content-type": "application/json" }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
        return;
      }
      res
        .writeHead(401, { "content-type": "application/json", "www-authenticate": `Bearer realm="http://127.0.0.1:${port(realm)}/token",service="rogue"` })
        .end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
    });
    regHost = `127.0.0.1:${port(registry)}`;
  });

  afterAll(async () => {
    await Promise.all([registry, realm].map((s) => new Promise((r) => s?.close(r))));
  });

  it("sends the registrytoken as Bearer to the registry and never calls the challenge's realm", async () => {
    atRegistry.length = 0;
    atRealm.length = 0;
    const image = `${regHost}/shop/web:v1`;
    await expect(h.cluster.pullImage("n2", image, { auth: { registrytoken: "eyJhbGciOiJub25lIn0.eyJhY2Nlc3MiOltdfQ.pull-only", serveraddress: regHost } })).rejects.toThrow(/manifest unknown|not found/i);
    expect(atRegistry.some((r) => r.path.startsWith("/v2/shop/web/manifests/") && r.authorization === "Bearer eyJhbGciOiJub25lIn0.eyJhY2Nlc3MiOltdfQ.pull-only")).toBe(true);
    expect(atRegistry.every((r) => r.authorization === undefined || r.authorization.startsWith("Bearer eyJhbGciOiJub25lIn0"))).toBe(true);
    expect(atRealm).toEqual([]);
  });

  it("(control) given a username and password, the engine sends them to that realm", async () => {
    atRealm.length = 0;
    const n2 = services.engines.n2!;
    const docker = new Docker({ socketPath: n2.replace(/^unix:\/\//, "") });
    // The engine answers the failed pull (the realm's token is no good at this registry) as an error.
    const pulled = docker
      .createImage({ fromImage: `${regHost}/shop/web`, tag: "v1", authconfig: { username: "capstan-controllers", password: "cst_console_token", serveraddress: regHost } })
      .then((stream: NodeJS.ReadableStream) => new Promise((resolve) => stream.on("end", resolve).on("error", resolve).resume()));
    await expect(pulled).rejects.toThrow(/manifest unknown/);
    expect(atRealm.map((r) => r.authorization)).toContain(`Basic ${Buffer.from("capstan-controllers:cst_console_token").toString("base64")}`);
  });
});
