// The secrets service over real HTTP with the console on loopback deciding authorization, on a
// PRIVATE real etcd (test/helpers/etcd-process.ts): the seal keys /platform/secrets/_sys/* are
// global, so initializing the shared etcd would leave it holding keys nobody has. Covers init /
// unseal / seal / status, sealed 503 and a restart (a new service on the same store is sealed),
// every authorization case, every bad input (400, store revision unchanged), encryption at rest
// (no plaintext in the store), the address binding (a copied value does not decrypt), and no
// secret, token or key in any log line of the run.
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";
import { createSecretsService, readSecrets, secretKey, secretsPrefix } from "../../../api/secrets/index.ts";
import { FakeClock } from "../../../runtime/clock.ts";
import type { Logger } from "../../../runtime/log.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { uniqueName } from "../../helpers/services.ts";
import { call, ConsoleHarness, serveApp, type Answer, type Served } from "../console/harness.ts";

const logLines: string[] = [];
const log: Logger = pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) });

const run = uniqueName("sec");
const appA = `${run}-a`;
const appB = `${run}-b`;
const procA = `${appA}.web.web`;
const procA2 = `${appA}.worker.sync_job`;
const procB = `${appB}.web.web`;
const alice = `alice-${run}@example.com`; // maintainer of A
const bob = `bob-${run}@example.com`; // maintainer of B only
const secretStrings: string[] = [];
const secret = (label: string) => {
  const s = `${label}-${randomBytes(12).toString("hex")}`;
  secretStrings.push(s);
  return s;
};

let etcd: EtcdProcess;
let store: EtcdStore;
let console_: ConsoleHarness;
let service: ReturnType<typeof createSecretsService>;
let served: Served;
let keys: string[] = [];
let rootToken = "";
const tokens: Record<string, string> = {};

const q = (params: Record<string, string>) => `/v2/secrets?${new URLSearchParams(params).toString()}`;
const api = (method: string, path: string, opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {}): Promise<Answer> => call(served.base, method, path, opts);

beforeAll(async () => {
  etcd = await startEtcd();
  store = new EtcdStore({ endpoints: [etcd.endpoint] });
  console_ = new ConsoleHarness(store, log);
  await console_.start();
  await console_.createApp(appA, [alice]);
  await console_.createApp(appB, [bob]);
  tokens.alice = (await console_.createToken(alice)).token;
  tokens.bob = (await console_.createToken(bob)).token;
  tokens.sync = (await console_.createToken(`secret-sync-${run}`, "sync")).token;
  tokens.admin = console_.admin.token;
  for (const t of Object.values(tokens)) secretStrings.push(t);
  // A verifier of its own, as in a separate secrets process: it sees the console's changes through the store.
  const verifier = new TokenVerifier({ store, clock: console_.clock });
  service = createSecretsService({ store, gate: tokenGate(verifier), apps: verifier, log });
  // GETs read the record cache once it has synced (before, and whenever it is behind, the store).
  for (const informer of service.informers) informer.start();
  for (const informer of service.informers) await informer.waitForSync();
  served = await serveApp(service.app);
});

/** Writes made outside the service (straight to the store) show in its GETs once its watch delivers them. */
const cacheReaches = async (revision: number) => {
  for (const informer of service.informers) await informer.waitForRevision(revision);
};

afterAll(async () => {
  await served?.close();
  for (const informer of service?.informers ?? []) await informer.stop();
  await console_?.stop();
  await store?.close();
  await etcd?.stop();
});

describe("seal", () => {
  it("is uninitialized and sealed on an empty store", async () => {
    expect((await api("GET", "/v2/sys/status")).body).toEqual({ initialized: false, sealed: true, progress: 0, threshold: 0, shares: 0 });
    expect((await api("POST", "/v2/sys/unseal", { body: { key: "AAAA" }, token: tokens.alice })).status).toBe(409);
    // Unsealing needs a valid token (any role): no anonymous junk shares can reset the progress.
    expect((await api("POST", "/v2/sys/unseal", { body: { key: "AAAA" } })).status).toBe(401);
    expect((await api("POST", "/v2/sys/seal", { token: "x" })).status).toBe(409);
  });

  it.each([
    [{ shares: 3, threshold: 4 }, "threshold"],
    [{ shares: 0, threshold: 0 }, "shares"],
    [{ shares: 256, threshold: 2 }, "shares"],
    [{ shares: 3, threshold: 1.5 }, "threshold"],
    [{ shares: 3 }, "threshold"],
    [{ shares: "3", threshold: 2 }, "shares"],
    [{ shares: 3, threshold: 2, extra: 1 }, "extra"],
  ])("refuses init %j naming %s", async (body, field) => {
    const before = await store.revision();
    const a = await api("POST", "/v2/sys/init", { body, token: tokens.admin });
    expect(a.status).toBe(400);
    expect(a.body.details!.map((d) => d.path)).toContain(field);
    expect(await store.revision()).toBe(before);
  });

  it("initializes once, answers 503 while sealed, unseals with threshold shares", async () => {
    // Initializing is an admin's: a maintainer's token is refused, and nothing is stored.
    const before = await store.revision();
    expect((await api("POST", "/v2/sys/init", { body: { shares: 3, threshold: 2 }, token: tokens.alice })).status).toBe(403);
    expect((await api("POST", "/v2/sys/init", { body: { shares: 3, threshold: 2 } })).status).toBe(401);
    expect(await store.revision()).toBe(before);
    const init = await api("POST", "/v2/sys/init", { body: { shares: 3, threshold: 2 }, token: tokens.admin });
    expect(init.status).toBe(200);
    keys = init.body.keys as string[];
    rootToken = init.body.rootToken as string;
    secretStrings.push(...keys, rootToken);
    expect(keys).toHaveLength(3);
    expect((await api("POST", "/v2/sys/init", { body: { shares: 1, threshold: 1 }, token: tokens.admin })).status).toBe(409);
    expect((await api("GET", "/v2/sys/status")).body).toEqual({ initialized: true, sealed: true, progress: 0, threshold: 2, shares: 3 });
    for (const [method, path] of [["PUT", q({ app: appA, proc: procA, path: "x" })], ["GET", q({ app: appA })], ["DELETE", q({ app: appA, proc: procA, path: "x" })]] as const) {
      const a = await api(method, path, { token: tokens.alice, body: method === "PUT" ? "x" : undefined });
      expect(a.status, method).toBe(503);
      expect(a.body.error).toBe("sealed");
    }
    let unsealed = 0;
    service.vault.onUnseal(() => unsealed++);
    expect((await api("POST", "/v2/sys/unseal", { body: { key: keys[2] }, token: tokens.alice })).body).toEqual({ sealed: true, progress: 1, threshold: 2 });
    expect((await api("POST", "/v2/sys/unseal", { body: { key: keys[0] }, token: tokens.alice })).body).toEqual({ sealed: false, progress: 0, threshold: 2 });
    expect(unsealed).toBe(1);
    expect(service.vault.sealed()).toBe(false);
    // Nothing that rebuilds the key is stored: no share appears in the store.
    const raw = (await store.list("/platform/")).items.map((kv) => kv.value).join("\n");
    for (const k of keys) expect(raw).not.toContain(k);
    expect(raw).not.toContain(rootToken);
  });
});

describe("secrets", () => {
  const contentA = secret("config-a");
  const contentRaw = `line one\n${secret("raw")}\n`;
  const contentB = secret("config-b");

  it("writes a record form with defaults and options, a raw body whole, and reads them back", async () => {
    const put1 = await api("PUT", q({ app: appA, proc: procA, path: "conf/app.yaml" }), { token: tokens.alice, body: { content: contentA } });
    expect(put1).toMatchObject({ status: 200, body: { app: appA, proc: procA, path: "conf/app.yaml" } });
    expect(put1.text).not.toContain(contentA);
    const put2 = await api("PUT", q({ app: appA, proc: procA, path: "/etc/raw.txt" }), { token: tokens.alice, body: contentRaw, headers: { "content-type": "text/plain" } });
    expect(put2.status).toBe(200);
    const jsonArray = JSON.stringify([secret("array-item")]);
    expect((await api("PUT", q({ app: appA, proc: procA2, path: "list.json" }), { token: tokens.alice, body: jsonArray, headers: { "content-type": "application/json" } })).status).toBe(200);
    const noContent = JSON.stringify({ password: secret("pw") });
    expect((await api("PUT", q({ app: appA, proc: procA2, path: "obj.json" }), { token: tokens.admin, body: noContent, headers: { "content-type": "application/json" } })).status).toBe(200);
    const withMode = { content: secret("moded"), owner: "root", group: "0", mode: "0640" };
    expect((await api("PUT", q({ app: appA, proc: procA2, path: "moded" }), { token: tokens.alice, body: withMode })).status).toBe(200);
    expect((await api("PUT", q({ app: appB, proc: procB, path: "b.txt" }), { token: tokens.bob, body: { content: contentB } })).status).toBe(200);

    const one = await api("GET", q({ app: appA, proc: procA }), { token: tokens.alice });
    expect(one.status).toBe(200);
    expect(one.body).toEqual([
      { path: "/etc/raw.txt", content: contentRaw, owner: "root", group: "root", mode: "400", proc: procA },
      { path: "conf/app.yaml", content: contentA, owner: "root", group: "root", mode: "400", proc: procA },
    ]);
    const all = (await api("GET", q({ app: appA }), { token: tokens.alice })).body as unknown as { path: string; content: string; proc: string; mode: string; owner: string }[];
    expect(all.map((r) => `${r.proc}:${r.path}`)).toEqual([`${procA}:/etc/raw.txt`, `${procA}:conf/app.yaml`, `${procA2}:list.json`, `${procA2}:moded`, `${procA2}:obj.json`]);
    expect(all.find((r) => r.path === "list.json")!.content).toBe(jsonArray);
    expect(all.find((r) => r.path === "obj.json")!.content).toBe(noContent);
    expect(all.find((r) => r.path === "moded")).toMatchObject({ ...withMode, proc: procA2 });
    const byPath = await api("GET", q({ app: appA, path: "conf/app.yaml" }), { token: tokens.sync });
    expect((byPath.body as unknown as unknown[]).length).toBe(1);
    expect((await api("GET", q({ app: appA, proc: `${appA}.web.none` }), { token: tokens.alice })).body).toEqual([]);

    // The in-process reader the Secret-sync controller uses agrees with the API.
    const entries = await readSecrets(store, service.vault, appA, procA);
    expect(entries.map((e) => [e.path, e.content, e.mode])).toEqual([["/etc/raw.txt", contentRaw, "400"], ["conf/app.yaml", contentA, "400"]]);
    expect(entries[0]!.modRevision).toBeGreaterThan(0);
  });

  it("overwrites on PUT and deletes idempotently", async () => {
    const path = q({ app: appA, proc: procA, path: "tmp" });
    await api("PUT", path, { token: tokens.alice, body: { content: secret("v1") } });
    const v2 = secret("v2");
    await api("PUT", path, { token: tokens.alice, body: { content: v2 } });
    expect(((await api("GET", q({ app: appA, proc: procA, path: "tmp" }), { token: tokens.alice })).body as unknown as { content: string }[])[0]!.content).toBe(v2);
    expect(await api("DELETE", path, { token: tokens.alice })).toMatchObject({ status: 200, body: { app: appA, proc: procA, path: "tmp", deleted: true } });
    expect(await store.get(secretKey(appA, procA, "tmp"))).toBeNull();
    expect(await api("DELETE", path, { token: tokens.alice })).toMatchObject({ status: 200, body: { deleted: false } });
  });

  it("one file, one record: /platform/app/x and x are the same path on PUT, GET and DELETE", async () => {
    const first = secret("abs");
    const put = await api("PUT", q({ app: appA, proc: procA2, path: "/platform/app/spelled.conf" }), { token: tokens.alice, body: { content: first } });
    expect(put).toMatchObject({ status: 200, body: { path: "spelled.conf" } });
    expect(await store.get(secretKey(appA, procA2, "spelled.conf"))).not.toBeNull();
    expect(await store.get(secretKey(appA, procA2, "/platform/app/spelled.conf"))).toBeNull();
    for (const path of ["spelled.conf", "/platform/app/spelled.conf"]) {
      const got = await api("GET", q({ app: appA, proc: procA2, path }), { token: tokens.alice });
      expect(got.body).toEqual([{ path: "spelled.conf", content: first, owner: "root", group: "root", mode: "400", proc: procA2 }]);
    }
    // A relative PUT overwrites it; a DELETE by the absolute spelling deletes it.
    const second = secret("rel");
    await api("PUT", q({ app: appA, proc: procA2, path: "spelled.conf" }), { token: tokens.alice, body: { content: second } });
    expect(((await api("GET", q({ app: appA, proc: procA2, path: "/platform/app/spelled.conf" }), { token: tokens.alice })).body as unknown as { content: string }[]).map((r) => r.content)).toEqual([second]);
    expect(await api("DELETE", q({ app: appA, proc: procA2, path: "/platform/app/spelled.conf" }), { token: tokens.alice })).toMatchObject({ status: 200, body: { path: "spelled.conf", deleted: true } });
    expect(await store.get(secretKey(appA, procA2, "spelled.conf"))).toBeNull();
    // Outside /platform/app an absolute path is its own file.
    expect(await api("PUT", q({ app: appA, proc: procA2, path: "/spelled.conf" }), { token: tokens.alice, body: "x" })).toMatchObject({ status: 200, body: { path: "/spelled.conf" } });
    expect((await api("GET", q({ app: appA, proc: procA2, path: "spelled.conf" }), { token: tokens.alice })).body).toEqual([]);
    await api("DELETE", q({ app: appA, proc: procA2, path: "/spelled.conf" }), { token: tokens.alice });
  });

  it("a record stored under /platform/app/x before the one-spelling rule: shown as x, replaced by a PUT of x, deleted by either", async () => {
    const old = secret("legacy");
    const legacyKey = secretKey(appA, procA2, "/platform/app/legacy.conf");
    await cacheReaches((await store.put(legacyKey, service.vault.encrypt(appA, procA2, "/platform/app/legacy.conf", { content: old, owner: "root", group: "root", mode: "400" }))).revision);
    const shown = await api("GET", q({ app: appA, proc: procA2, path: "legacy.conf" }), { token: tokens.alice });
    expect(shown.body).toMatchObject([{ path: "legacy.conf", content: old }]);
    const fresh = secret("fresh");
    await api("PUT", q({ app: appA, proc: procA2, path: "legacy.conf" }), { token: tokens.alice, body: fresh });
    expect(await store.get(legacyKey)).toBeNull();
    expect((await api("GET", q({ app: appA, proc: procA2 }), { token: tokens.alice })).body).toContainEqual(expect.objectContaining({ path: "legacy.conf", content: fresh }));
    // Both spellings stored (written straight to the store): GET shows the later one once; DELETE removes both.
    await cacheReaches((await store.put(legacyKey, service.vault.encrypt(appA, procA2, "/platform/app/legacy.conf", { content: old, owner: "root", group: "root", mode: "400" }))).revision);
    const both = ((await api("GET", q({ app: appA, proc: procA2 }), { token: tokens.alice })).body as unknown as { path: string; content: string }[]).filter((r) => r.path === "legacy.conf");
    expect(both.map((r) => r.content)).toEqual([old]);
    expect(await api("DELETE", q({ app: appA, proc: procA2, path: "legacy.conf" }), { token: tokens.alice })).toMatchObject({ body: { deleted: true } });
    expect(await store.get(legacyKey)).toBeNull();
    expect(await store.get(secretKey(appA, procA2, "legacy.conf"))).toBeNull();
  });

  it("records stored under a leading // before it was refused: a PUT replaces them, a DELETE of the file removes them", async () => {
    const put = (path: string, content: string) => store.put(secretKey(appA, procA2, path), service.vault.encrypt(appA, procA2, path, { content, owner: "root", group: "root", mode: "400" }));
    const appKey = secretKey(appA, procA2, "//platform/app/slashed.conf");
    const etcKey = secretKey(appA, procA2, "//etc/slashed-token");
    await put("//platform/app/slashed.conf", secret("slashed-app"));
    await cacheReaches((await put("//etc/slashed-token", secret("slashed-etc"))).revision);
    // DELETE of the file's spelling removes the // record too (and says a record existed).
    expect(await api("DELETE", q({ app: appA, proc: procA2, path: "slashed.conf" }), { token: tokens.alice })).toMatchObject({ status: 200, body: { path: "slashed.conf", deleted: true } });
    expect(await store.get(appKey)).toBeNull();
    expect(await api("DELETE", q({ app: appA, proc: procA2, path: "/etc/slashed-token" }), { token: tokens.alice })).toMatchObject({ status: 200, body: { deleted: true } });
    expect(await store.get(etcKey)).toBeNull();
    expect(((await api("GET", q({ app: appA, proc: procA2 }), { token: tokens.alice })).body as unknown as { path: string }[]).filter((r) => r.path.includes("slashed"))).toEqual([]);
    // A PUT of the file replaces a // record the cache holds, in the same transaction.
    await cacheReaches((await put("//platform/app/slashed.conf", secret("slashed-old"))).revision);
    const fresh = secret("slashed-new");
    expect((await api("PUT", q({ app: appA, proc: procA2, path: "slashed.conf" }), { token: tokens.alice, body: fresh })).status).toBe(200);
    expect(await store.get(appKey)).toBeNull();
    expect(((await api("GET", q({ app: appA, proc: procA2, path: "slashed.conf" }), { token: tokens.alice })).body as unknown as { content: string }[]).map((r) => r.content)).toEqual([fresh]);
    await api("DELETE", q({ app: appA, proc: procA2, path: "slashed.conf" }), { token: tokens.alice });
  });

  it("a record stored with another owner or a setuid mode before those were refused still reads", async () => {
    const content = secret("oldmode");
    await cacheReaches((await store.put(secretKey(appA, procA2, "oldmode"), service.vault.encrypt(appA, procA2, "oldmode", { content, owner: "1000", group: "1000", mode: "7777" }))).revision);
    expect((await api("GET", q({ app: appA, proc: procA2, path: "oldmode" }), { token: tokens.alice })).body).toEqual([{ path: "oldmode", content, owner: "1000", group: "1000", mode: "7777", proc: procA2 }]);
    await api("DELETE", q({ app: appA, proc: procA2, path: "oldmode" }), { token: tokens.alice });
  });

  it("refuses setuid/setgid/sticky modes naming mode, and non-root owners citing the spec's root-only rule", async () => {
    const mode = await api("PUT", q({ app: appA, proc: procA, path: "p" }), { token: tokens.alice, body: { content: "c", mode: "7777" } });
    expect(mode.status).toBe(400);
    expect(mode.body.details).toEqual([{ path: "mode", message: expect.stringContaining("setuid, setgid or sticky") }]);
    for (const field of ["owner", "group"]) {
      const a = await api("PUT", q({ app: appA, proc: procA, path: "p" }), { token: tokens.alice, body: { content: "c", [field]: "1000" } });
      expect(a.status).toBe(400);
      expect(a.body.details).toEqual([{ path: field, message: expect.stringContaining("the spec supports only root as the owner of secret files at runtime") }]);
    }
    expect(await store.get(secretKey(appA, procA, "p"))).toBeNull();
  });

  it("keeps no plaintext in the store", async () => {
    const { items } = await store.list(secretsPrefix);
    expect(items.length).toBeGreaterThanOrEqual(6);
    const raw = items.map((kv) => `${kv.key}\n${kv.value}`).join("\n");
    for (const s of secretStrings) expect(raw).not.toContain(s);
    for (const kv of items.filter((i) => !i.key.includes("/_sys/"))) expect(kv.value).toMatch(/^v1\.[A-Za-z0-9+/]+=*$/);
  });

  it("binds a value to its address: a copy elsewhere fails the read with 500 naming it", async () => {
    const original = (await store.get(secretKey(appA, procA, "conf/app.yaml")))!;
    const moved = secretKey(appA, procA, "conf/stolen.yaml");
    await cacheReaches((await store.put(moved, original.value)).revision);
    try {
      const a = await api("GET", q({ app: appA, proc: procA }), { token: tokens.alice });
      expect(a.status).toBe(500);
      expect(a.body.error).toMatch(/conf\/stolen\.yaml/);
      expect(a.text).not.toContain(contentA);
      // Copied into another app: B's read fails too, A's own record stays readable.
      await cacheReaches((await store.delete(moved)).revision);
      await cacheReaches((await store.put(secretKey(appB, procB, "conf/app.yaml"), original.value)).revision);
      expect((await api("GET", q({ app: appB }), { token: tokens.bob })).status).toBe(500);
      expect((await api("GET", q({ app: appA, proc: procA }), { token: tokens.alice })).status).toBe(200);
    } finally {
      await store.delete(moved);
      await store.delete(secretKey(appB, procB, "conf/app.yaml"));
    }
  });

  describe("authorization", () => {
    const put = (token?: string, app = appA, proc = procA) => api("PUT", q({ app, proc, path: "authz" }), { body: { content: "authz" }, ...(token === undefined ? {} : { token }) });
    const get = (token?: string, app = appA) => api("GET", q({ app }), token === undefined ? {} : { token });
    const del = (token?: string, app = appA, proc = procA) => api("DELETE", q({ app, proc, path: "authz" }), token === undefined ? {} : { token });

    it("lets maintainers and admins write, read and delete", async () => {
      for (const token of [tokens.alice!, tokens.admin!]) {
        expect((await put(token)).status).toBe(200);
        expect((await get(token)).status).toBe(200);
        expect((await del(token)).status).toBe(200);
      }
    });

    it("lets the sync role read only", async () => {
      expect((await get(tokens.sync)).status).toBe(200);
      const p = await put(tokens.sync);
      expect(p.status).toBe(403);
      expect(p.body.error).toMatch(/may not write app/);
      expect((await del(tokens.sync)).status).toBe(403);
      expect(await store.get(secretKey(appA, procA, "authz"))).toBeNull();
    });

    it("answers 401 for no, malformed, unknown, expired and revoked tokens", async () => {
      const expiring = await console_.createToken(alice, "user", "1h");
      const revoked = await console_.createToken(alice);
      expect((await call(console_.base, "DELETE", `/api/v1/tokens/${revoked.id}`, { token: tokens.admin })).status).toBe(200);
      console_.clock.offsetMs = 2 * 3600_000;
      try {
        for (const [what, token] of [["none", undefined], ["empty", ""], ["malformed", "nope"], ["unknown", `cst_000000000000_${"A".repeat(43)}`], ["expired", expiring.token], ["revoked", revoked.token]] as const) {
          for (const a of [await put(token), await get(token), await del(token)]) {
            expect(a.status, what).toBe(401);
            expect(a.body.error, what).toBeTypeOf("string");
          }
        }
      } finally {
        console_.clock.offsetMs = 0;
      }
    });

    it("answers 403 to a valid token without a role, and a token for A never reads B", async () => {
      const a = await get(tokens.bob, appA);
      expect(a.status).toBe(403);
      expect(a.text).not.toContain(contentA);
      expect((await put(tokens.bob)).status).toBe(403);
      expect((await del(tokens.bob)).status).toBe(403);
      const b = await get(tokens.alice, appB);
      expect(b.status).toBe(403);
      expect(b.text).not.toContain(contentB);
      // alice cannot reach B's records through A either: the proc must belong to the app.
      expect((await api("GET", q({ app: appA, proc: procB }), { token: tokens.alice })).status).toBe(400);
    });

    it("answers 404 for an app the console does not know", async () => {
      expect((await get(tokens.admin, `${run}-nope`)).status).toBe(404);
    });
  });

  describe("bad input", () => {
    const big = "x".repeat((1 << 20) + 1);
    const cases: { what: string; method: string; params: Record<string, string> | string; body?: unknown; headers?: Record<string, string>; field: string }[] = [
      { what: "app missing", method: "PUT", params: { proc: procA, path: "p" }, body: { content: "c" }, field: "app" },
      { what: "app malformed", method: "PUT", params: { app: "App_A", proc: procA, path: "p" }, body: { content: "c" }, field: "app" },
      { what: "proc missing", method: "PUT", params: { app: appA, path: "p" }, body: { content: "c" }, field: "proc" },
      { what: "proc without type", method: "PUT", params: { app: appA, proc: `${appA}.web`, path: "p" }, body: { content: "c" }, field: "proc" },
      { what: "proc of another app", method: "PUT", params: { app: appA, proc: procB, path: "p" }, body: { content: "c" }, field: "proc" },
      { what: "path missing", method: "PUT", params: { app: appA, proc: procA }, body: { content: "c" }, field: "path" },
      { what: "path empty", method: "PUT", params: { app: appA, proc: procA, path: "" }, body: { content: "c" }, field: "path" },
      { what: "path with ..", method: "PUT", params: { app: appA, proc: procA, path: "conf/../../etc/passwd" }, body: { content: "c" }, field: "path" },
      { what: "path ..", method: "PUT", params: { app: appA, proc: procA, path: ".." }, body: { content: "c" }, field: "path" },
      { what: "path with NUL", method: "PUT", params: { app: appA, proc: procA, path: "a\u0000b" }, body: { content: "c" }, field: "path" },
      { what: "path too long", method: "PUT", params: { app: appA, proc: procA, path: "a".repeat(4097) }, body: { content: "c" }, field: "path" },
      { what: "path a directory", method: "PUT", params: { app: appA, proc: procA, path: "conf/" }, body: { content: "c" }, field: "path" },
      { what: "path the app directory", method: "PUT", params: { app: appA, proc: procA, path: "/platform/app" }, body: { content: "c" }, field: "path" },
      { what: "path with a leading //", method: "PUT", params: { app: appA, proc: procA, path: "//etc/token" }, body: { content: "c" }, field: "path" },
      { what: "DELETE path with a leading //", method: "DELETE", params: { app: appA, proc: procA, path: "//platform/app/x" }, field: "path" },
      { what: "path escaping the app directory", method: "PUT", params: { app: appA, proc: procA, path: "/platform/app/../etc/x" }, body: { content: "c" }, field: "path" },
      { what: "app given twice", method: "PUT", params: `app=${appA}&app=${appB}&proc=${procA}&path=p`, body: { content: "c" }, field: "app" },
      { what: "mode not octal", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: { content: "c", mode: "999" }, field: "mode" },
      { what: "mode too long", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: { content: "c", mode: "04000" }, field: "mode" },
      { what: "mode a number", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: { content: "c", mode: 400 }, field: "mode" },
      { what: "owner malformed", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: { content: "c", owner: "a b" }, field: "owner" },
      { what: "unknown field", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: { content: "c", onwer: "root" }, field: "onwer" },
      { what: "body over 1 MiB", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: big, headers: { "content-type": "text/plain" }, field: "body" },
      { what: "body not UTF-8", method: "PUT", params: { app: appA, proc: procA, path: "p" }, body: new Uint8Array([0xff, 0xfe, 0x00]), field: "body" },
      { what: "GET app missing", method: "GET", params: {}, field: "app" },
      { what: "GET proc of another app", method: "GET", params: { app: appA, proc: procB }, field: "proc" },
      { what: "GET path with ..", method: "GET", params: { app: appA, path: "../x" }, field: "path" },
      { what: "DELETE path missing", method: "DELETE", params: { app: appA, proc: procA }, field: "path" },
      { what: "DELETE path with NUL", method: "DELETE", params: { app: appA, proc: procA, path: "\u0000" }, field: "path" },
    ];

    it.each(cases)("$what: 400 naming $field, nothing written", async (c) => {
      const before = await store.revision();
      const query = typeof c.params === "string" ? c.params : new URLSearchParams(c.params).toString();
      const a = await api(c.method, `/v2/secrets?${query}`, { token: tokens.alice, ...(c.body !== undefined ? { body: c.body } : {}), ...(c.headers ? { headers: c.headers } : {}) });
      expect(a.status).toBe(400);
      expect(a.body.error).toBeTypeOf("string");
      expect(a.body.details!.map((d) => d.path)).toContain(c.field);
      expect(await store.revision()).toBe(before);
      expect(await store.get(secretKey(appA, procA, "p"))).toBeNull();
    });

    it("refuses a chunked body over 1 MiB (no content-length) with 400", async () => {
      const before = await store.revision();
      // node:http on a connection of its own: the server answers before reading the whole body and
      // then closes that connection, which must not be one a later test's fetch would reuse.
      const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(`${served.base}${q({ app: appA, proc: procA, path: "p" })}`, { method: "PUT", agent: false, headers: { "access-token": tokens.alice! } }, (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on("error", (e: NodeJS.ErrnoException) => (e.code === "EPIPE" || e.code === "ECONNRESET" ? undefined : reject(e)));
        const chunk = Buffer.alloc(256 * 1024, 0x61);
        for (let i = 0; i < 5; i++) req.write(chunk);
        req.end();
      });
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/exceeds 1 MiB/);
      expect(await store.revision()).toBe(before);
    });

    it("accepts a chunked body within 1 MiB", async () => {
      const content = secret("chunked");
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(content));
          controller.close();
        },
      });
      const res = await fetch(`${served.base}${q({ app: appA, proc: procA, path: "chunked" })}`, {
        method: "PUT",
        headers: { "access-token": tokens.alice! },
        body: stream,
        duplex: "half",
        signal: AbortSignal.timeout(10_000),
      } as RequestInit);
      expect(res.status).toBe(200);
      const got = await api("GET", q({ app: appA, proc: procA, path: "chunked" }), { token: tokens.alice });
      expect((got.body as unknown as { content: string }[])[0]!.content).toBe(content);
      expect((await api("DELETE", q({ app: appA, proc: procA, path: "chunked" }), { token: tokens.alice })).body.deleted).toBe(true);
    });

    it("authenticates before validating: no token is 401 even for bad input", async () => {
      expect((await api("PUT", "/v2/secrets?app=Bad_App", { body: "c" })).status).toBe(401);
    });
  });
});

describe("restart and seal", () => {
  it("a new service on the same store starts sealed; wrong shares fail; right ones unseal", async () => {
    const verifier = new TokenVerifier({ store });
    const restarted = createSecretsService({ store, gate: tokenGate(verifier), apps: verifier, log });
    const second = await serveApp(restarted.app);
    try {
      const call2 = (method: string, path: string, opts: { body?: unknown; token?: string } = {}) => call(second.base, method, path, opts);
      expect((await call2("GET", "/v2/sys/status")).body).toEqual({ initialized: true, sealed: true, progress: 0, threshold: 2, shares: 3 });
      expect((await call2("GET", q({ app: appA }), { token: tokens.alice })).status).toBe(503);
      const wrong = [randomBytes(33).toString("base64"), randomBytes(33).toString("base64")];
      expect((await call2("POST", "/v2/sys/unseal", { body: { key: wrong[0] }, token: tokens.alice })).body).toMatchObject({ sealed: true, progress: 1 });
      const failed = await call2("POST", "/v2/sys/unseal", { body: { key: wrong[1] }, token: tokens.alice });
      expect(failed.status).toBe(400);
      expect(failed.body.error).toMatch(/do not rebuild the master key; progress is reset/);
      expect((await call2("GET", "/v2/sys/status")).body).toMatchObject({ sealed: true, progress: 0 });
      // One right share and one wrong share also fail.
      await call2("POST", "/v2/sys/unseal", { body: { key: keys[1] }, token: tokens.alice });
      expect((await call2("POST", "/v2/sys/unseal", { body: { key: wrong[0] }, token: tokens.alice })).status).toBe(400);
      expect((await call2("POST", "/v2/sys/unseal", { body: { key: "short" }, token: tokens.alice })).status).toBe(400);
      await call2("POST", "/v2/sys/unseal", { body: { key: keys[1] }, token: tokens.alice });
      expect((await call2("POST", "/v2/sys/unseal", { body: { key: keys[2] }, token: tokens.alice })).body).toEqual({ sealed: false, progress: 0, threshold: 2 });
      const got = await call2("GET", q({ app: appA, proc: procA }), { token: tokens.alice });
      expect(got.status).toBe(200);
      expect((got.body as unknown as { path: string; content: string }[]).find((r) => r.path === "conf/app.yaml")!.content).toBe(contentOf("config-a"));

      // seal needs the root token in access-token.
      expect((await call2("POST", "/v2/sys/seal")).status).toBe(401);
      expect((await call2("POST", "/v2/sys/seal", { token: tokens.admin })).status).toBe(401);
      let sealed = 0;
      restarted.vault.onSeal(() => sealed++);
      expect(await call2("POST", "/v2/sys/seal", { token: rootToken })).toMatchObject({ status: 200, body: { sealed: true } });
      expect(sealed).toBe(1);
      expect((await call2("GET", q({ app: appA }), { token: tokens.alice })).status).toBe(503);
      expect(restarted.vault.sealed()).toBe(true);
    } finally {
      await second.close();
    }
  });
});

describe("token cache", () => {
  it("reuses a token record for 2 s only: a token revoked on the console works until then, and not after", async () => {
    const clock = new FakeClock(1_000_000);
    const verifier = new TokenVerifier({ store, clock });
    const cached = createSecretsService({ store, gate: tokenGate(verifier), apps: verifier, log });
    const third = await serveApp(cached.app);
    try {
      for (const k of [keys[0]!, keys[1]!]) await call(third.base, "POST", "/v2/sys/unseal", { body: { key: k }, token: tokens.alice });
      const t = await console_.createToken(alice);
      secretStrings.push(t.token);
      expect((await call(third.base, "GET", q({ app: appA }), { token: t.token })).status).toBe(200);
      expect((await call(console_.base, "DELETE", `/api/v1/tokens/${t.id}`, { token: tokens.admin })).status).toBe(200);
      clock.advance(1999);
      expect((await call(third.base, "GET", q({ app: appA }), { token: t.token })).status).toBe(200);
      // The cached record grants only what it granted: alice maintains A, not B.
      expect((await call(third.base, "GET", q({ app: appB }), { token: t.token })).status).toBe(403);
      clock.advance(1);
      expect((await call(third.base, "GET", q({ app: appA }), { token: t.token })).status).toBe(401);
    } finally {
      await third.close();
    }
  });
});

describe("logs", () => {
  it("hold no secret content, token, unseal key or root token", () => {
    expect(logLines.length).toBeGreaterThan(10);
    const all = logLines.join("");
    expect(all).toContain("secret written");
    for (const s of secretStrings) expect(all).not.toContain(s);
  });
});

function contentOf(label: string): string {
  const s = secretStrings.find((x) => x.startsWith(`${label}-`));
  if (s === undefined) throw new Error(`no secret labelled ${label}`);
  return s;
}
