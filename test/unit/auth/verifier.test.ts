// TokenVerifier on an in-memory SQLite store (the real adapter) and a fake wall clock: what a
// token grants, how long a revoked token or a removed maintainer keeps working (at most ttlMs),
// and that nothing about a bad token is told apart.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { TokenVerifier } from "../../../api/auth/index.ts";
import { appKey, generateToken, hashSecret, tokenKey } from "../../../api/console/index.ts";
import { ApiError } from "../../../api/http/index.ts";

let store: SqliteStore;
let now = 1_000_000;
const clock = { now: () => now };

async function token(role: string, user: string, extra: object = {}): Promise<{ id: string; token: string }> {
  const t = generateToken();
  await store.put(tokenKey(t.id), JSON.stringify({ id: t.id, user, role, hash: hashSecret(t.secret), createdAt: new Date(now).toISOString(), ...extra }));
  return { id: t.id, token: t.token };
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    if (e instanceof ApiError) return e.status;
    throw e;
  }
}

beforeEach(async () => {
  store = new SqliteStore({ path: ":memory:" });
  now = 1_000_000;
  await store.put(appKey("shop"), JSON.stringify({ appname: "shop", maintainers: ["alice@example.com"], createdAt: "x" }));
});
afterEach(async () => store.close());

describe("TokenVerifier", () => {
  it("builds the principal: a user's apps are the apps listing its e-mail, a viewer's its grants", async () => {
    const v = new TokenVerifier({ store, clock });
    const alice = await token("user", "alice@example.com");
    const carol = await token("viewer", "carol@example.com", { apps: ["shop", "blog"] });
    expect(await v.verify(alice.token)).toMatchObject({ tokenId: alice.id, user: "alice@example.com", role: "user", apps: new Set(["shop"]) });
    expect(await v.verify(carol.token)).toMatchObject({ role: "viewer", apps: new Set(["shop", "blog"]) });
    expect(await v.registered("shop")).toBe(true);
    expect(await v.registered("blog")).toBe(false);
  });

  it("answers 401 alike for malformed, unknown, wrong-secret, expired and revoked tokens", async () => {
    const v = new TokenVerifier({ store, clock });
    const expiring = await token("user", "alice@example.com", { expiresAt: new Date(now + 1000).toISOString() });
    const revoked = await token("admin", "admin");
    await v.verify(revoked.token);
    await store.delete(tokenKey(revoked.id));
    v.forget();
    now += 1000;
    const wrong = `${expiring.token.slice(0, 17)}${"A".repeat(43)}`;
    for (const t of ["nope", `cst_000000000000_${"A".repeat(43)}`, wrong, expiring.token, revoked.token]) {
      await expect(v.verify(t)).rejects.toMatchObject({ status: 401, body: { message: "invalid, expired or revoked access token" } });
    }
  });

  it("a token revoked elsewhere works for at most ttlMs; a removed maintainer loses the app as fast", async () => {
    const v = new TokenVerifier({ store, clock, ttlMs: 2000 });
    const alice = await token("user", "alice@example.com");
    await v.verify(alice.token);
    await store.delete(tokenKey(alice.id));
    await store.put(appKey("shop"), JSON.stringify({ appname: "shop", maintainers: ["bob@example.com"], createdAt: "x" }));
    now += 1999;
    expect((await v.verify(alice.token)).apps.has("shop")).toBe(true);
    now += 1;
    expect(await status(v.verify(alice.token))).toBe(401);
  });

  it("an unknown id is read again every time, so a token created elsewhere works at once", async () => {
    const v = new TokenVerifier({ store, clock });
    const t = generateToken();
    expect(await status(v.verify(t.token))).toBe(401);
    await store.put(tokenKey(t.id), JSON.stringify({ id: t.id, user: "admin", role: "admin", hash: hashSecret(t.secret), createdAt: "x" }));
    expect(await status(v.verify(t.token))).toBe(200);
  });

  it("concurrent checks of one token share one store read", async () => {
    const v = new TokenVerifier({ store, clock });
    const alice = await token("user", "alice@example.com");
    let gets = 0;
    const get = store.get.bind(store);
    store.get = async (key) => {
      gets++;
      return get(key);
    };
    await Promise.all(Array.from({ length: 20 }, () => v.verify(alice.token)));
    expect(gets).toBe(1);
  });

  it("a token that verified is taken as verified while its record is cached, but its expiry is still checked and forget() drops it", async () => {
    const v = new TokenVerifier({ store, clock, ttlMs: 2000 });
    const bob = await token("viewer", "bob@example.com", { apps: ["shop"], expiresAt: new Date(now + 1500).toISOString() });
    const first = await v.verify(bob.token);
    expect(first).toMatchObject({ tokenId: bob.id, user: "bob@example.com", role: "viewer", apps: new Set(["shop"]) });
    // Another secret under the same id is checked in full, not taken from the cache.
    expect(await status(v.verify(`${bob.token.slice(0, 17)}${"A".repeat(43)}`))).toBe(401);
    now += 1499;
    expect(await v.verify(bob.token)).toEqual(first);
    now += 1; // expired, within the 2 s the record is cached
    expect(await status(v.verify(bob.token))).toBe(401);

    const alice = await token("user", "alice@example.com");
    await v.verify(alice.token);
    await store.delete(tokenKey(alice.id));
    v.forget();
    expect(await status(v.verify(alice.token))).toBe(401);
  });

  it("admin and sync tokens share one empty app set, which cannot change", async () => {
    const v = new TokenVerifier({ store, clock });
    const admin = await v.verify((await token("admin", "admin")).token);
    const sync = await v.verify((await token("sync", "secret-sync")).token);
    expect(admin.apps.size).toBe(0);
    expect(sync.apps).toBe(admin.apps);
    expect(() => (admin.apps as Set<string>).add("shop")).toThrow(TypeError);
    expect(admin.apps.size).toBe(0);
  });
});
