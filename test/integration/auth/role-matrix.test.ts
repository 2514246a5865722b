// Who may call what, over every endpoint of every API (docs/security.md, "Roles"), against a real
// `capstan up` on a private etcd and the real engines: admin, maintainer of app A, maintainer of
// app B, viewer of A, the sync identity, and no, malformed, expired and revoked tokens. Every row
// asserts the status code and, for every refusal, that the keys the request would have written are
// unchanged in the store. Identities run in the order least to most privileged, so a write that is
// allowed comes after every refusal of the same row.
import { mkdirSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../../adapters/cluster/index.ts";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { generateToken } from "../../../api/console/index.ts";
import { startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const run = uniqueName("rm").replace(/[^a-z0-9]/g, "");
const appA = `${run}a`;
const appB = `${run}b`;
const alice = `alice-${run}@example.com`;
const bob = `bob-${run}@example.com`;
const carol = `carol-${run}@example.com`;
const admin = generateToken().token;

type Id = "none" | "malformed" | "expired" | "revoked" | "sync" | "viewerA" | "maintainerB" | "maintainerA" | "admin";
const invalid: Id[] = ["none", "malformed", "expired", "revoked"];
const valid = ["sync", "viewerA", "maintainerB", "maintainerA", "admin"] as const;
type Valid = (typeof valid)[number];
const tokens: Partial<Record<Id, string>> = { malformed: "cst_not_a_token", admin };

let etcd: EtcdProcess;
let store: EtcdStore;
let up: CapstanProcess;
let orchestrator: CapstanProcess | undefined;
const allowedDir = `/tmp/${run}-allowed`;

interface Answer {
  status: number;
  body: Record<string, unknown> & { code?: string; message?: string };
  headers: Headers;
}

async function call(method: string, path: string, id: Id, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  const token = tokens[id];
  // Alice sends the kubectl/Nomad form, everyone else `access-token` (docs/security.md, "Two header forms"): both must work everywhere.
  if (token !== undefined) {
    if (id === "maintainerA") headers.authorization = `Bearer ${token}`;
    else headers["access-token"] = token;
  }
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(up.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  let parsed: Answer["body"] = {};
  try {
    parsed = JSON.parse(text) as Answer["body"];
  } catch {
    parsed = { raw: text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

const adminCall = async (method: string, path: string, body?: unknown) => {
  const a = await call(method, path, "admin", body);
  expect(a.status, `${method} ${path}: ${JSON.stringify(a.body)}`).toBeLessThan(300);
  return a.body;
};

const pod = (ns: string, extra: object = {}) => ({
  namespace: ns,
  network: "none",
  containers: [{ image: services.testImage, command: ["sleep", "3600"], memoryLimit: 8 << 20, ...extra }],
});
const group = (name: string, ns: string, extra: object = {}) => ({ name, namespace: ns, numInstances: 0, restartPolicy: "never", pod: { ...pod(ns), ...extra } });
const dependency = (name: string, ns: string) => ({ name, ...pod(ns) });

/** What a row does for one identity, and the store prefixes it would write. */
interface Row {
  what: string;
  expect: Record<Valid, number>;
  request(id: Id): { method: string; path: string; body?: unknown };
  touches(id: Id): string[];
  check?(id: Id, a: Answer): void;
}

const pg = (name: string) => `/platform/orchestrator/podgroups/${name}`;
const dep = (name: string) => `/platform/orchestrator/depends/${name}`;
const all200 = { sync: 200, viewerA: 200, maintainerB: 200, maintainerA: 200, admin: 200 };
const readA = { sync: 200, viewerA: 200, maintainerB: 403, maintainerA: 200, admin: 200 };
const writeA = (ok: number) => ({ sync: 403, viewerA: 403, maintainerB: 403, maintainerA: ok, admin: ok });
const adminOnly = (ok: number) => ({ sync: 403, viewerA: 403, maintainerB: 403, maintainerA: 403, admin: ok });
const names = (a: Answer) => (a.body as unknown as { spec: { name: string } }[]).map((g) => g.spec.name);

const rows: Row[] = [
  {
    what: "GET /api/podgroups/_all (listings show only readable groups)",
    expect: all200,
    request: () => ({ method: "GET", path: "/api/podgroups/_all" }),
    touches: () => [],
    check: (id, a) => {
      const seesA = names(a).includes(`${appA}.g`);
      expect(seesA, id).toBe(id !== "maintainerB");
      if (id === "maintainerB" || id === "viewerA" || id === "maintainerA") expect(names(a).every((n) => n.startsWith(id === "maintainerB" ? appB : appA)), id).toBe(true);
    },
  },
  { what: "GET /api/podgroups?name=", expect: readA, request: () => ({ method: "GET", path: `/api/podgroups?name=${appA}.g` }), touches: () => [] },
  { what: "GET /api/podgroups/logs?name= (logs are a read)", expect: readA, request: () => ({ method: "GET", path: `/api/podgroups/logs?name=${appA}.g` }), touches: () => [] },
  {
    what: "GET /api/podgroups?force_update=true (a refresh task is a write)",
    expect: { ...writeA(200), viewerA: 403, sync: 403 },
    request: () => ({ method: "GET", path: `/api/podgroups?name=${appA}.g&force_update=true` }),
    touches: () => ["/platform/orchestrator/tasks/"],
  },
  { what: "POST /api/podgroups", expect: writeA(202), request: (id) => ({ method: "POST", path: "/api/podgroups", body: group(`${appA}.new-${id.toLowerCase()}`, appA) }), touches: (id) => [pg(`${appA}.new-${id.toLowerCase()}`)] },
  {
    what: "PATCH /api/podgroups cmd=replica",
    expect: writeA(202),
    request: (id) => ({ method: "PATCH", path: `/api/podgroups?name=${appA}.p-${id.toLowerCase()}&cmd=replica&num_instances=0&restart_policy=always` }),
    touches: (id) => [pg(`${appA}.p-${id.toLowerCase()}`)],
  },
  {
    what: "PATCH /api/podgroups cmd=spec",
    expect: writeA(202),
    request: (id) => ({ method: "PATCH", path: `/api/podgroups?name=${appA}.p-${id.toLowerCase()}&cmd=spec`, body: { ...pod(appA), annotation: id } }),
    touches: (id) => [pg(`${appA}.p-${id.toLowerCase()}`)],
  },
  {
    what: "POST /api/podgroups/restart (a rolling restart is a write)",
    expect: writeA(202),
    request: (id) => ({ method: "POST", path: `/api/podgroups/restart?name=${appA}.p-${id.toLowerCase()}` }),
    touches: (id) => [pg(`${appA}.p-${id.toLowerCase()}`)],
  },
  { what: "DELETE /api/podgroups", expect: writeA(202), request: (id) => ({ method: "DELETE", path: `/api/podgroups?name=${appA}.d-${id.toLowerCase()}` }), touches: (id) => [pg(`${appA}.d-${id.toLowerCase()}`)] },
  {
    what: "GET /api/depends/_all",
    expect: all200,
    request: () => ({ method: "GET", path: "/api/depends/_all" }),
    touches: () => [],
    check: (id, a) => expect(names(a).includes(`${appA}.dep`), id).toBe(id !== "maintainerB"),
  },
  { what: "GET /api/depends?name=", expect: readA, request: () => ({ method: "GET", path: `/api/depends?name=${appA}.dep` }), touches: () => [] },
  { what: "POST /api/depends", expect: writeA(202), request: (id) => ({ method: "POST", path: "/api/depends", body: dependency(`${appA}.dep-${id.toLowerCase()}`, appA) }), touches: (id) => [dep(`${appA}.dep-${id.toLowerCase()}`)] },
  { what: "PUT /api/depends", expect: writeA(202), request: (id) => ({ method: "PUT", path: "/api/depends", body: { ...dependency(`${appA}.dd-${id.toLowerCase()}`, appA), annotation: id } }), touches: (id) => [dep(`${appA}.dd-${id.toLowerCase()}`)] },
  { what: "DELETE /api/depends", expect: writeA(202), request: (id) => ({ method: "DELETE", path: `/api/depends?name=${appA}.dd-${id.toLowerCase()}` }), touches: (id) => [dep(`${appA}.dd-${id.toLowerCase()}`)] },
  { what: "GET /api/nodes", expect: all200, request: () => ({ method: "GET", path: "/api/nodes" }), touches: () => [] },
  { what: "PATCH /api/nodes cmd=drift", expect: adminOnly(202), request: () => ({ method: "PATCH", path: `/api/nodes?cmd=drift&from=gone-${run}` }), touches: () => ["/platform/orchestrator/tasks/"] },
  { what: "GET /api/v1/apps", expect: adminOnly(200), request: () => ({ method: "GET", path: "/api/v1/apps" }), touches: () => [] },
  { what: "GET /api/v1/apps/<app>", expect: adminOnly(200), request: () => ({ method: "GET", path: `/api/v1/apps/${appA}` }), touches: () => [] },
  { what: "POST /api/v1/apps", expect: adminOnly(201), request: (id) => ({ method: "POST", path: "/api/v1/apps", body: { appname: `${run}${id.toLowerCase()}`, maintainers: [`dave-${run}@example.com`] } }), touches: () => ["/platform/console/"] },
  { what: "PUT /api/v1/apps/<app>/maintainers", expect: adminOnly(200), request: () => ({ method: "PUT", path: `/api/v1/apps/${appA}/maintainers`, body: { maintainers: [alice] } }), touches: () => ["/platform/console/"] },
  { what: "DELETE /api/v1/apps/<app>", expect: adminOnly(200), request: () => ({ method: "DELETE", path: `/api/v1/apps/${run}del` }), touches: () => ["/platform/console/"] },
  { what: "POST /api/v1/tokens", expect: adminOnly(201), request: () => ({ method: "POST", path: "/api/v1/tokens", body: { user: carol, role: "viewer", apps: [appB] } }), touches: () => ["/platform/console/"] },
  { what: "GET /api/v1/tokens", expect: adminOnly(200), request: () => ({ method: "GET", path: "/api/v1/tokens" }), touches: () => [] },
  { what: "DELETE /api/v1/tokens/<id>", expect: adminOnly(404), request: () => ({ method: "DELETE", path: "/api/v1/tokens/000000000000" }), touches: () => ["/platform/console/"] },
  { what: "GET /api/v1/repos/<app>/roles/", expect: readA, request: () => ({ method: "GET", path: `/api/v1/repos/${appA}/roles/` }), touches: () => [] },
  {
    what: "GET /api/v1/whoami",
    expect: all200,
    request: () => ({ method: "GET", path: "/api/v1/whoami" }),
    touches: () => [],
    check: (id, a) => {
      const expected = { sync: ["sync", []], viewerA: ["viewer", [appA]], maintainerB: ["user", [appB]], maintainerA: ["user", [appA]], admin: ["admin", []] }[id as Valid];
      expect([a.body.role, a.body.apps], id).toEqual(expected);
      expect(a.body.allApps, id).toBe(id === "admin" || id === "sync");
    },
  },
  {
    what: "PUT /v2/secrets",
    expect: writeA(200),
    request: (id) => ({ method: "PUT", path: `/v2/secrets?app=${appA}&proc=${appA}.web.web&path=${id}.conf`, body: { content: `written by ${id}` } }),
    touches: () => [`/platform/secrets/${appA}/`],
  },
  { what: "GET /v2/secrets (a viewer does not read secrets)", expect: { ...readA, viewerA: 403 }, request: () => ({ method: "GET", path: `/v2/secrets?app=${appA}` }), touches: () => [] },
  { what: "DELETE /v2/secrets", expect: writeA(200), request: (id) => ({ method: "DELETE", path: `/v2/secrets?app=${appA}&proc=${appA}.web.web&path=${id}.conf` }), touches: () => [`/platform/secrets/${appA}/`] },
  { what: "POST /v2/sys/init (admin only; already initialized)", expect: adminOnly(409), request: () => ({ method: "POST", path: "/v2/sys/init", body: { shares: 1, threshold: 1 } }), touches: () => ["/platform/secrets/"] },
];

async function snapshot(prefixes: string[]): Promise<string> {
  const parts: string[] = [];
  for (const p of prefixes) {
    const { items } = await store.list(p);
    parts.push(...items.map((kv) => `${kv.key}@${kv.modRevision}`));
  }
  return parts.join("\n");
}

beforeAll(async () => {
  etcd = await startEtcd();
  store = new EtcdStore({ endpoints: [etcd.endpoint] });
  mkdirSync(allowedDir, { recursive: true });
  up = await startCapstan("up", ["-store", `etcd://${etcd.endpoint}`, "-cluster", services.cluster, "-data", `/tmp/${run}`, "-allowed-host-paths", allowedDir, "-update-wait", "1s"], {
    CAPSTAN_ADMIN_TOKEN: admin,
  });
  await adminCall("POST", "/api/v1/apps", { appname: appA, maintainers: [alice] });
  await adminCall("POST", "/api/v1/apps", { appname: appB, maintainers: [bob] });
  const token = async (user: string, role: string, extra: object = {}) => ((await adminCall("POST", "/api/v1/tokens", { user, role, ...extra })) as { token: string; id: string });
  tokens.maintainerA = (await token(alice, "user")).token;
  tokens.maintainerB = (await token(bob, "user")).token;
  tokens.viewerA = (await token(carol, "viewer", { apps: [appA] })).token;
  tokens.sync = (await token(`sync-${run}`, "sync")).token;
  tokens.expired = (await token(alice, "user", { expiresIn: "1s" })).token;
  const revoked = await token(alice, "user");
  tokens.revoked = revoked.token;
  await adminCall("DELETE", `/api/v1/tokens/${revoked.id}`);
  await adminCall("POST", "/api/v1/apps", { appname: `${run}del`, maintainers: [`dave-${run}@example.com`] });

  await adminCall("POST", "/api/podgroups", group(`${appA}.g`, appA));
  await adminCall("POST", "/api/podgroups", group(`${appB}.g`, appB));
  await adminCall("POST", "/api/depends", dependency(`${appA}.dep`, appA));
  for (const id of valid) {
    await adminCall("POST", "/api/podgroups", group(`${appA}.p-${id.toLowerCase()}`, appA));
    await adminCall("POST", "/api/podgroups", group(`${appA}.d-${id.toLowerCase()}`, appA));
    await adminCall("POST", "/api/depends", dependency(`${appA}.dd-${id.toLowerCase()}`, appA));
  }
  const { keys } = (await adminCall("POST", "/v2/sys/init", { shares: 1, threshold: 1 })) as { keys: string[] };
  await adminCall("POST", "/v2/sys/unseal", { key: keys[0] });
  // The expiring token has lived its second once the console says so.
  await pollUntil("the 1 s token to expire", async () => (await call("GET", "/api/v1/whoami", "expired")).status === 401, 5_000);
}, 90_000);

afterAll(async () => {
  await orchestrator?.stop();
  await up?.stop();
  // The host-access test's group may still be being removed when the orchestrator stops: its container goes here.
  const cluster = DockerCluster.fromSpec(services.cluster);
  const mine = (await cluster.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } })).filter((c) => (c.labels["io.capstan.podgroup"] ?? "").startsWith(run));
  await Promise.all(mine.map((c) => cluster.remove(c, { force: true }).catch(() => undefined)));
  rmSync(allowedDir, { recursive: true, force: true });
  rmSync(`/tmp/${run}`, { recursive: true, force: true });
  await store?.close();
  await etcd?.stop();
});

describe("role matrix", () => {
  it.each(rows.map((r) => [r.what, r] as const))("%s", async (_what, row) => {
    for (const id of [...invalid, ...valid]) {
      const { method, path, body } = row.request(id);
      const touched = row.touches(id);
      const before = await snapshot(touched);
      const a = await call(method, path, id, body);
      const expected = (invalid as string[]).includes(id) ? 401 : row.expect[id as Valid];
      expect(a.status, `${id}: ${method} ${path}: ${JSON.stringify(a.body)}`).toBe(expected);
      if (a.status >= 400) {
        expect(typeof a.body.message, `${id}: JSON error body`).toBe("string");
        expect(await snapshot(touched), `${id}: ${method} ${path} changed the store`).toBe(before);
      }
      if (a.status === 401) expect(a.headers.get("www-authenticate"), id).toBe('Bearer realm="capstan"');
      if (a.status === 403) expect(a.body.code).toBe("Forbidden");
      if (a.status < 300) row.check?.(id, a);
    }
  });
});

describe("audit", () => {
  it("logs every authenticated write as one JSON line naming the token id, never the token", async () => {
    const lines = up
      .log()
      .split("\n")
      .filter((l) => l.includes('"audit":true'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const mine = lines.filter((l) => l.user === alice && l.method === "POST" && l.path === "/api/podgroups");
    expect(mine.length).toBeGreaterThan(0);
    expect(mine[0]).toMatchObject({ role: "user", status: 202, outcome: "allowed", object: `podgroup/${appA}.new-maintainera` });
    expect(typeof mine[0]!.tokenId).toBe("string");
    expect(mine[0]!.time).toBeTypeOf("number");
    expect(lines.some((l) => l.user === bob && l.outcome === "denied" && l.status === 403)).toBe(true);
    // A refused POST names its object too, and a GET that writes a refresh request is audited.
    expect(lines.some((l) => l.user === bob && l.method === "POST" && l.object === `podgroup/${appA}.new-maintainerb` && l.outcome === "denied")).toBe(true);
    expect(lines.some((l) => l.user === alice && l.method === "GET" && l.object === `podgroup/${appA}.g` && l.status === 200)).toBe(true);
    for (const t of Object.values(tokens)) if (t.length > 20) expect(up.log()).not.toContain(t.slice(17));
  });
});

describe("host access", () => {
  it("a maintainer's bind other than <allowed>/<app> is refused naming the field; that one is mounted", async () => {
    const before = await snapshot([pg(`${appA}.host`)]);
    const outside = await call("POST", "/api/podgroups", "maintainerA", group(`${appA}.host`, appA, { containers: [{ image: services.testImage, systemVolumes: ["/etc:/host-etc:ro"] }] }));
    expect(outside.status).toBe(403);
    expect(outside.body.message).toContain("pod.containers[0].systemVolumes[0]");
    const network = await call("POST", "/api/podgroups", "maintainerA", { ...group(`${appA}.host`, appA), pod: { ...pod(appA), network: "host" } });
    expect(network.status).toBe(403);
    expect(network.body.message).toContain("pod.network");
    expect(await snapshot([pg(`${appA}.host`)])).toBe(before);

    // Below the app's own directory is refused too: a symlink planted there would be followed.
    const below = await call("POST", "/api/podgroups", "maintainerA", group(`${appA}.host`, appA, { containers: [{ image: services.testImage, systemVolumes: [`${allowedDir}/${appA}/x:/x`] }] }));
    expect(below.status).toBe(403);
    const others = await call("POST", "/api/podgroups", "maintainerB", group(`${appB}.host`, appB, { containers: [{ image: services.testImage, systemVolumes: [`${allowedDir}/${appA}:/x`] }] }));
    expect(others.status).toBe(403);
    expect(await snapshot([pg(`${appA}.host`), pg(`${appB}.host`)])).toBe(before);

    const inside = { ...group(`${appA}.host`, appA), numInstances: 1, pod: { ...pod(appA, { systemVolumes: [`${allowedDir}/${appA}:/logs`] }) } };
    expect((await call("POST", "/api/podgroups", "maintainerA", inside)).status).toBe(202);
    const cluster = DockerCluster.fromSpec(services.cluster);
    {
      const binds = await pollUntil(
        "the instance's container",
        async () => {
          const [c] = await cluster.listContainers(undefined, { all: true, filters: { label: [`io.capstan.podgroup=${appA}.host`] } });
          return c === undefined ? undefined : (await cluster.inspect(c)).binds;
        },
        30_000,
        200,
      );
      expect(binds).toContain(`${allowedDir}/${appA}:/logs`);
    }
    expect((await call("DELETE", `/api/podgroups?name=${appA}.host`, "maintainerA")).status).toBe(202);
  });

  it("the Docker socket, or a directory holding it, is refused even for an admin", async () => {
    for (const bind of ["/var/run/docker.sock:/var/run/docker.sock", "/run:/host-run", "/:/host"]) {
      const a = await call("POST", "/api/podgroups", "admin", group(`${appA}.sock`, appA, { containers: [{ image: services.testImage, systemVolumes: [bind] }] }));
      expect(a.status, bind).toBe(403);
      expect(a.body.message, bind).toContain("never mountable");
    }
    // An engine socket of -cluster too (the services' engines listen on unix sockets under their own directories).
    const socket = services.engines.n1!.replace(/^unix:\/\//, "");
    const a = await call("POST", "/api/podgroups", "admin", group(`${appA}.sock`, appA, { containers: [{ image: services.testImage, systemVolumes: [`${socket}:/d.sock`] }] }));
    expect(a.status).toBe(403);
  });
});

describe("secrets reach only their own app", () => {
  it("a maintainer of B cannot name a group so that Secret-sync installs A's secrets into it", async () => {
    const files = { containers: [{ image: services.testImage, secretFiles: ["config.yaml"] }] };
    // A's proc name in B's namespace: refused (names are for their own app); in A's namespace: no write on A.
    expect((await call("POST", "/api/podgroups", "maintainerB", group(`${appA}.web.web`, appB, files))).status).toBe(403);
    expect((await call("POST", "/api/podgroups", "maintainerB", group(`${appA}.web.web`, appA, files))).status).toBe(403);
    expect((await call("POST", "/api/podgroups", "maintainerB", group(appA, appB, files))).status).toBe(403);
    // Not even an admin can make a group of namespace B receive A's secrets.
    const mixed = await call("POST", "/api/podgroups", "admin", group(`${appA}.web.web`, appB, files));
    expect(mixed.status).toBe(400);
    expect(mixed.body.message).toContain("secretFiles");
    // Its own app's name is fine.
    expect((await call("POST", "/api/podgroups", "maintainerB", group(`${appB}.web.web`, appB, files))).status).toBe(202);
  });
});

describe("revocation", () => {
  it("a token revoked on the console stops working in another process within 5 s", async () => {
    orchestrator = await startCapstan("orchestrator", ["-store", `etcd://${etcd.endpoint}`, "-cluster", services.cluster]);
    const t = (await adminCall("POST", "/api/v1/tokens", { user: alice, role: "user" })) as { token: string; id: string };
    const get = () => fetch(`${orchestrator!.url}/api/podgroups?name=${appA}.g`, { headers: { authorization: `Bearer ${t.token}` }, signal: AbortSignal.timeout(5_000) });
    expect((await get()).status).toBe(200);
    await adminCall("DELETE", `/api/v1/tokens/${t.id}`);
    const revokedAt = Date.now();
    await pollUntil("the revoked token to be refused by the other process", async () => (await get()).status === 401, 5_000, 50);
    expect(Date.now() - revokedAt).toBeLessThan(5_000);
  });
});

describe("other apps' objects", () => {
  it("a maintainer of B may not list A's dependency in a group; a viewer grant names registered apps only", async () => {
    const before = await snapshot([pg(`${appB}.deps`)]);
    const refused = await call("POST", "/api/podgroups", "maintainerB", { ...group(`${appB}.deps`, appB), pod: { ...pod(appB), dependencies: [{ podName: `${appA}.dep`, policy: "node" }] } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain("pod.dependencies[0].podName");
    expect(await snapshot([pg(`${appB}.deps`)])).toBe(before);
    const grant = await call("POST", "/api/v1/tokens", "admin", { user: carol, role: "viewer", apps: [appA, `${run}nosuchapp`] });
    expect(grant.status).toBe(400);
    expect(grant.body.message).toContain("apps[1]");
  });
});
