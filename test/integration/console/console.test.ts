// The console over real HTTP: apps and maintainers, tokens (creation shown once, listing without
// secrets, expiry, revocation), the role check the secrets service relies on, and every bad input
// answered 400/404/409 with nothing written. Runs on the shared etcd (names from uniqueName) and,
// where a whole-store property is asserted (revision unchanged, last admin token), on a private
// SQLite store.
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { appKey, AdminTokenError, createConsoleApi, ensureAdminToken, generateToken, parseToken, tokenKey, tokensPrefix } from "../../../api/console/index.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { call, ConsoleHarness, serveApp } from "./harness.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";

const run = uniqueName("con");
const stores: [string, () => Store][] = [
  ["etcd", () => new EtcdStore({ endpoints: loadServices().etcdEndpoints })],
  ["sqlite", () => new SqliteStore({ path: ":memory:" })],
];

describe.each(stores)("console on %s", (storeName, open) => {
  const store = open();
  const h = new ConsoleHarness(store);
  const app = `${run}-${storeName}`;
  const alice = `Alice.${run}@Example.com`;
  let aliceToken = "";
  let bobToken = "";
  let syncToken = "";

  beforeAll(async () => {
    await h.start();
    await h.createApp(app, [alice, alice.toLowerCase(), "carol@example.com"]);
    aliceToken = (await h.createToken(alice.toLowerCase())).token;
    bobToken = (await h.createToken(`bob.${run}@example.com`)).token;
    syncToken = (await h.createToken(`secret-sync-${run}`, "sync")).token;
  });

  afterAll(async () => {
    await h.stop();
    await store.close();
  });

  it("registers an app with lower-cased, de-duplicated maintainers and serves it", async () => {
    const stored = JSON.parse((await store.get(appKey(app)))!.value) as { appname: string; maintainers: string[]; createdAt: string };
    expect(stored.appname).toBe(app);
    expect(stored.maintainers).toEqual([alice.toLowerCase(), "carol@example.com"]);
    expect(Number.isNaN(Date.parse(stored.createdAt))).toBe(false);
    const got = await h.call("GET", `/api/v1/apps/${app}`, { token: h.admin.token });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(stored);
    const list = await h.call("GET", "/api/v1/apps", { token: h.admin.token });
    expect(list.status).toBe(200);
    expect((list.body as unknown as { appname: string }[]).map((a) => a.appname)).toContain(app);
  });

  it("answers 409 for an app that is already registered and keeps the first", async () => {
    const before = await store.get(appKey(app));
    const again = await h.call("POST", "/api/v1/apps", { body: { appname: app, maintainers: ["mallory@example.com"] }, token: h.admin.token });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/already registered/);
    expect((await store.get(appKey(app)))!.modRevision).toBe(before!.modRevision);
  });

  it("changes maintainers and unregisters", async () => {
    const other = `${app}-tmp`;
    await h.createApp(other, ["a@example.com"]);
    const changed = await h.call("PUT", `/api/v1/apps/${other}/maintainers`, { body: { maintainers: ["B@Example.com"] }, token: h.admin.token });
    expect(changed.status).toBe(200);
    expect(changed.body.maintainers).toEqual(["b@example.com"]);
    expect(JSON.parse((await store.get(appKey(other)))!.value).maintainers).toEqual(["b@example.com"]);
    const del = await h.call("DELETE", `/api/v1/apps/${other}`, { token: h.admin.token });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ appname: other, deleted: true });
    expect(await store.get(appKey(other))).toBeNull();
    expect((await h.call("GET", `/api/v1/apps/${other}`, { token: h.admin.token })).status).toBe(404);
    expect((await h.call("DELETE", `/api/v1/apps/${other}`, { token: h.admin.token })).status).toBe(404);
    expect((await h.call("PUT", `/api/v1/apps/${other}/maintainers`, { body: { maintainers: ["b@example.com"] }, token: h.admin.token })).status).toBe(404);
  });

  it("adds and removes maintainers from the list as stored (PATCH): edits at once all land", async () => {
    const other = `${app}-edit`;
    await h.createApp(other, ["a@example.com"]);
    const patch = (body: unknown) => h.call("PATCH", `/api/v1/apps/${other}/maintainers`, { body, token: h.admin.token });
    const added = await patch({ add: ["B@Example.com", "a@example.com"] });
    expect(added.status).toBe(200);
    expect(added.body).toMatchObject({ app: { appname: other, maintainers: ["a@example.com", "b@example.com"] }, added: ["b@example.com"], removed: [] });
    const removed = await patch({ remove: ["a@example.com", "zed@example.com"] });
    expect(removed.body).toMatchObject({ app: { maintainers: ["b@example.com"] }, added: [], removed: ["a@example.com"] });
    // Nothing to do: nothing written.
    const revision = await store.revision();
    expect((await patch({ remove: ["zed@example.com"] })).body).toMatchObject({ app: { maintainers: ["b@example.com"] }, added: [], removed: [] });
    expect(await store.revision()).toBe(revision);
    // Ten admins adding one each at once: every one lands (a read, then a PUT of the whole list, would lose most).
    const many = Array.from({ length: 10 }, (_, i) => `m${i}@example.com`);
    const answers = await Promise.all(many.map((e) => patch({ add: [e] })));
    expect(answers.map((a) => a.status)).toEqual(many.map(() => 200));
    expect(JSON.parse((await store.get(appKey(other)))!.value).maintainers).toEqual(expect.arrayContaining(["b@example.com", ...many]));
    expect(JSON.parse((await store.get(appKey(other)))!.value).maintainers).toHaveLength(11);
    // The last one stays: refused, naming remove, nothing written.
    const before = (await store.get(appKey(other)))!.value;
    const last = await patch({ remove: ["b@example.com", ...many] });
    expect(last.status).toBe(400);
    expect(last.body.details).toEqual([{ path: "remove", message: expect.stringMatching(new RegExp(`^app ${other} would have no maintainer left \\(it has b@example\\.com, m\\d@example\\.com, .*\\): add the new one first$`)) }]);
    expect((await store.get(appKey(other)))!.value).toBe(before);
    expect((await h.call("PATCH", `/api/v1/apps/${other}-none/maintainers`, { body: { add: ["b@example.com"] }, token: h.admin.token })).status).toBe(404);
    // No more than 100, as POST and PUT: refused, naming add, nothing written.
    const over = await patch({ add: Array.from({ length: 90 }, (_, i) => `over${i}@example.com`) });
    expect(over.status).toBe(400);
    expect(over.body.details).toEqual([{ path: "add", message: `app ${other} would have 101 maintainers, more than 100` }]);
    expect((await store.get(appKey(other)))!.value).toBe(before);
    await h.call("DELETE", `/api/v1/apps/${other}`, { token: h.admin.token });
  });

  it("shows a token once and stores only the hash of its secret", async () => {
    const created = await h.call("POST", "/api/v1/tokens", { body: { user: "Dave@Example.com", expiresIn: "24h" }, token: h.admin.token });
    expect(created.status).toBe(201);
    const { id, token, user, role, expiresAt, createdAt } = created.body as Record<string, string>;
    expect(token).toMatch(new RegExp(`^cst_${id}_[A-Za-z0-9_-]{43}$`));
    expect(user).toBe("dave@example.com");
    expect(role).toBe("user");
    expect(Date.parse(expiresAt!) - Date.parse(createdAt!)).toBe(24 * 3600_000);
    const raw = (await store.get(tokenKey(id!)))!.value;
    // The whole secret part (base64url, which may itself contain "_": splitting on "_" was flaky).
    expect(raw).not.toContain(parseToken(token!)!.secret);
    expect(JSON.parse(raw).hash).toMatch(/^[0-9a-f]{64}$/);
    const list = await h.call("GET", "/api/v1/tokens", { token: h.admin.token });
    expect(list.status).toBe(200);
    const mine = (list.body as unknown as Record<string, unknown>[]).find((t) => t.id === id);
    expect(mine).toEqual({ id, user: "dave@example.com", role: "user", createdAt, expiresAt });
    expect(list.text).not.toMatch(/"hash"|cst_/);
    const revoke = await h.call("DELETE", `/api/v1/tokens/${id}`, { token: h.admin.token });
    expect(revoke.status).toBe(200);
    expect(await store.get(tokenKey(id!))).toBeNull();
    expect((await h.call("DELETE", `/api/v1/tokens/${id}`, { token: h.admin.token })).status).toBe(404);
  });

  describe("role check", () => {
    const role = (token: string | undefined, name = app, slash = "/") => h.call("GET", `/api/v1/repos/${name}/roles${slash}`, token === undefined ? {} : { token });

    it("answers each role", async () => {
      expect(await role(aliceToken)).toMatchObject({ status: 200, body: { role: { role: "maintainer" } } });
      expect(await role(aliceToken, app, "")).toMatchObject({ status: 200, body: { role: { role: "maintainer" } } });
      expect(await role(h.admin.token)).toMatchObject({ status: 200, body: { role: { role: "admin" } } });
      expect(await role(syncToken)).toMatchObject({ status: 200, body: { role: { role: "sync" } } });
    });

    it("refuses a valid token without a role with 403 and an unknown app with 404", async () => {
      const bob = await role(bobToken);
      expect(bob.status).toBe(403);
      expect(bob.body.error).toMatch(/has no role on app/);
      expect((await role(aliceToken, `${app}-nope`)).status).toBe(404);
    });

    it("answers 401 for a missing, malformed, unknown, wrong-secret, expired or revoked token", async () => {
      const wrongSecret = `${aliceToken.slice(0, 17)}${"A".repeat(43)}`;
      const unknown = generateToken().token;
      for (const token of [undefined, "", "garbage", wrongSecret, unknown]) {
        const a = await role(token);
        expect(a.status, String(token)).toBe(401);
        expect(a.body.error).toBeTypeOf("string");
      }
      const short = await h.createToken(alice.toLowerCase(), "user", "1h");
      expect((await role(short.token)).status).toBe(200);
      h.clock.offsetMs = 3600_000;
      try {
        expect((await role(short.token)).status).toBe(401);
      } finally {
        h.clock.offsetMs = 0;
      }
      const revoked = await h.createToken(alice.toLowerCase());
      expect((await role(revoked.token)).status).toBe(200);
      expect((await h.call("DELETE", `/api/v1/tokens/${revoked.id}`, { token: h.admin.token })).status).toBe(200);
      expect((await role(revoked.token)).status).toBe(401);
    });
  });

  it("needs an admin token for admin calls: 401 without one, 403 with a user or sync token", async () => {
    const calls: [string, string, unknown?][] = [
      ["GET", "/api/v1/apps"],
      ["POST", "/api/v1/apps", { appname: `${app}-x`, maintainers: ["a@example.com"] }],
      ["GET", `/api/v1/apps/${app}`],
      ["DELETE", `/api/v1/apps/${app}`],
      ["PUT", `/api/v1/apps/${app}/maintainers`, { maintainers: ["a@example.com"] }],
      ["PATCH", `/api/v1/apps/${app}/maintainers`, { add: ["a@example.com"] }],
      ["POST", "/api/v1/tokens", { user: "x@example.com" }],
      ["GET", "/api/v1/tokens"],
      ["DELETE", `/api/v1/tokens/${h.admin.id}`],
    ];
    for (const [method, path, body] of calls) {
      expect((await h.call(method, path, { body })).status, `${method} ${path}`).toBe(401);
      expect((await h.call(method, path, { body, token: aliceToken })).status, `${method} ${path}`).toBe(403);
      expect((await h.call(method, path, { body, token: syncToken })).status, `${method} ${path}`).toBe(403);
    }
    expect(await store.get(appKey(app))).not.toBeNull();
    expect(await store.get(appKey(`${app}-x`))).toBeNull();
  });

  interface BadCase {
    what: string;
    method: string;
    path: string;
    body?: unknown;
    headers?: Record<string, string>;
    status: number;
    field: string;
  }
  const bad = (): BadCase[] => [
    { what: "appname upper case", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-UP`, maintainers: ["a@example.com"] }, status: 400, field: "appname" },
    { what: "appname with underscore", method: "POST", path: "/api/v1/apps", body: { appname: `${app}_x`, maintainers: ["a@example.com"] }, status: 400, field: "appname" },
    { what: "appname with a dot", method: "POST", path: "/api/v1/apps", body: { appname: `${app}.web`, maintainers: ["a@example.com"] }, status: 400, field: "appname" },
    { what: "appname too long", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-${"x".repeat(64)}`, maintainers: ["a@example.com"] }, status: 400, field: "appname" },
    { what: "appname missing", method: "POST", path: "/api/v1/apps", body: { maintainers: ["a@example.com"] }, status: 400, field: "appname" },
    { what: "maintainer not an e-mail", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-m1`, maintainers: ["alice"] }, status: 400, field: "maintainers[0]" },
    { what: "maintainers empty", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-m2`, maintainers: [] }, status: 400, field: "maintainers" },
    { what: "maintainers not a list", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-m3`, maintainers: "a@example.com" }, status: 400, field: "maintainers" },
    { what: "unknown field", method: "POST", path: "/api/v1/apps", body: { appname: `${app}-m4`, maintainers: ["a@example.com"], owner: "x" }, status: 400, field: "owner" },
    { what: "malformed JSON", method: "POST", path: "/api/v1/apps", body: "{", headers: { "content-type": "application/json" }, status: 400, field: "body" },
    { what: "not JSON", method: "POST", path: "/api/v1/apps", body: "appname=x", headers: { "content-type": "application/x-www-form-urlencoded" }, status: 400, field: "content-type" },
    { what: "maintainers change not e-mail", method: "PUT", path: `/api/v1/apps/${app}/maintainers`, body: { maintainers: ["nope"] }, status: 400, field: "maintainers[0]" },
    { what: "maintainers edit: add not an e-mail", method: "PATCH", path: `/api/v1/apps/${app}/maintainers`, body: { add: ["nope"] }, status: 400, field: "add[0]" },
    { what: "maintainers edit: nothing to do", method: "PATCH", path: `/api/v1/apps/${app}/maintainers`, body: {}, status: 400, field: "add" },
    { what: "maintainers edit: one e-mail both added and removed", method: "PATCH", path: `/api/v1/apps/${app}/maintainers`, body: { add: ["x@example.com"], remove: ["X@example.com"] }, status: 400, field: "remove" },
    { what: "maintainers edit: unknown field", method: "PATCH", path: `/api/v1/apps/${app}/maintainers`, body: { maintainers: ["x@example.com"] }, status: 400, field: "maintainers" },
    { what: "bad app name in the URL", method: "GET", path: "/api/v1/apps/Bad_Name", status: 400, field: "app" },
    { what: "token user not an e-mail", method: "POST", path: "/api/v1/tokens", body: { user: "alice" }, status: 400, field: "user" },
    { what: "token role unknown", method: "POST", path: "/api/v1/tokens", body: { user: "a@example.com", role: "root" }, status: 400, field: "role" },
    { what: "token lifetime malformed", method: "POST", path: "/api/v1/tokens", body: { user: "a@example.com", expiresIn: "1 day" }, status: 400, field: "expiresIn" },
    { what: "token lifetime too long", method: "POST", path: "/api/v1/tokens", body: { user: "a@example.com", expiresIn: "9999d" }, status: 400, field: "expiresIn" },
    { what: "token id malformed", method: "DELETE", path: "/api/v1/tokens/XYZ", status: 400, field: "id" },
  ];

  it("answers bad input with 400 naming the field and writes nothing", async () => {
    for (const c of bad()) {
      const tokensBefore = (await store.list(tokensPrefix)).items.length;
      const revisionBefore = await store.revision();
      const a = await h.call(c.method, c.path, { body: c.body, token: h.admin.token, ...(c.headers ? { headers: c.headers } : {}) });
      expect(a.status, c.what).toBe(c.status);
      expect(a.body.code, c.what).toBe("BadRequest");
      expect(a.body.error, c.what).toBe(a.body.message);
      expect((a.body.details ?? []).map((d) => d.path), c.what).toContain(c.field);
      for (const name of [`${app}-m1`, `${app}-m2`, `${app}-m3`, `${app}-m4`]) expect(await store.get(appKey(name))).toBeNull();
      expect((await store.list(tokensPrefix)).items.length, c.what).toBe(tokensBefore);
      // The shared etcd has other writers; the private store proves no write at all.
      if (storeName === "sqlite") expect(await store.revision(), c.what).toBe(revisionBefore);
    }
  });
});

describe("admin token on first start", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-console-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("creates one in an empty store, writes it with mode 0600, and keeps it on the next start", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    const file = join(dir, "admin-token");
    expect(await ensureAdminToken({ store, adminTokenFile: file })).toEqual({ created: true });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const token = (await readFile(file, "utf8")).trim();
    expect(token).toMatch(/^cst_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/);
    expect(await ensureAdminToken({ store, adminTokenFile: file })).toEqual({ created: false });
    expect((await readFile(file, "utf8")).trim()).toBe(token);
    const served = await serveApp(createConsoleApi({ store, gate: tokenGate(new TokenVerifier({ store })) }));
    try {
      expect((await call(served.base, "GET", "/api/v1/tokens", { token })).status).toBe(200);
      // The only admin token cannot be revoked (it would lock every admin out).
      const last = await call(served.base, "DELETE", `/api/v1/tokens/${token.slice(4, 16)}`, { token });
      expect(last.status).toBe(409);
      expect(last.body.error).toMatch(/last admin token/);
    } finally {
      await served.close();
      await store.close();
    }
  });

  it("registers CAPSTAN_ADMIN_TOKEN by hash, refuses a conflicting one, and needs a file or a token", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    try {
      const given = generateToken();
      expect(await ensureAdminToken({ store, envToken: given.token })).toEqual({ created: true });
      expect(await ensureAdminToken({ store, envToken: given.token })).toEqual({ created: false });
      expect((await store.get(tokenKey(given.id)))!.value).not.toContain(given.secret);
      const impostor = `cst_${given.id}_${"B".repeat(43)}`;
      await expect(ensureAdminToken({ store, envToken: impostor })).rejects.toBeInstanceOf(AdminTokenError);
      await expect(ensureAdminToken({ store, envToken: "not-a-token" })).rejects.toBeInstanceOf(AdminTokenError);
      const empty = new SqliteStore({ path: ":memory:" });
      await expect(ensureAdminToken({ store: empty })).rejects.toThrow(/admin-token-file or CAPSTAN_ADMIN_TOKEN/);
      await empty.close();
    } finally {
      await store.close();
    }
  });
});
