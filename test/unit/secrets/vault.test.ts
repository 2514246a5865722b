// The seal on a private in-memory store: init once, unseal with threshold shares (any subset),
// wrong shares reset progress, a new Vault on the same store starts sealed, seal forgets the key.
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { SealedError, Vault, VaultStateError } from "../../../api/secrets/vault.ts";

const record = { content: "top secret", owner: "root", group: "root", mode: "400" };
const stores: SqliteStore[] = [];
const newStore = () => {
  const s = new SqliteStore({ path: ":memory:" });
  stores.push(s);
  return s;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

describe("vault", () => {
  it("initializes once, unseals with any threshold subset, and a new instance starts sealed", async () => {
    const store = newStore();
    const vault = new Vault(store);
    expect(await vault.status()).toMatchObject({ initialized: false, sealed: true, threshold: 0 });
    const { keys, rootToken } = await vault.init(5, 3);
    expect(keys).toHaveLength(5);
    expect(new Set(keys).size).toBe(5);
    expect(rootToken).toMatch(/^csr_/);
    await expect(vault.init(5, 3)).rejects.toMatchObject({ status: 409 });
    expect(vault.sealed()).toBe(true);
    expect(() => vault.encrypt("a", "a.web.w", "p", record)).toThrow(SealedError);

    let unsealed = 0;
    vault.onUnseal(() => unsealed++);
    expect(await vault.unseal(keys[4]!)).toEqual({ sealed: true, progress: 1, threshold: 3 });
    expect(await vault.unseal(keys[4]!)).toEqual({ sealed: true, progress: 1, threshold: 3 });
    expect(await vault.unseal(keys[1]!)).toEqual({ sealed: true, progress: 2, threshold: 3 });
    expect(await vault.unseal(keys[2]!)).toEqual({ sealed: false, progress: 0, threshold: 3 });
    expect(unsealed).toBe(1);
    const value = vault.encrypt("a", "a.web.w", "p", record);

    const restarted = new Vault(store);
    expect(restarted.sealed()).toBe(true);
    expect(await restarted.status()).toMatchObject({ initialized: true, sealed: true, progress: 0, threshold: 3, shares: 5 });
    for (const k of [keys[0]!, keys[3]!, keys[1]!]) await restarted.unseal(k);
    expect(restarted.decrypt("a", "a.web.w", "p", value)).toMatchObject(record);

    let sealed = 0;
    restarted.onSeal(() => sealed++);
    await restarted.seal();
    expect(restarted.sealed()).toBe(true);
    expect(sealed).toBe(1);
    expect(() => restarted.decrypt("a", "a.web.w", "p", value)).toThrow(SealedError);
  });

  it("refuses shares of another init and resets progress", async () => {
    const vault = new Vault(newStore());
    const other = new Vault(newStore());
    const mine = (await vault.init(3, 2)).keys;
    const theirs = (await other.init(3, 2)).keys;
    await vault.unseal(mine[0]!);
    const err = await vault.unseal(theirs[1]!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VaultStateError);
    expect((err as VaultStateError).status).toBe(400);
    expect((err as VaultStateError).message).toMatch(/progress is reset/);
    expect((await vault.status()).progress).toBe(0);
    expect(vault.sealed()).toBe(true);
    await vault.unseal(mine[2]!);
    expect((await vault.unseal(mine[0]!)).sealed).toBe(false);
  });

  it("refuses two shares whose x coordinates collide as wrong shares, not a server error", async () => {
    const vault = new Vault(newStore());
    const { keys } = await vault.init(3, 2);
    // Forge a share that differs from a real one but keeps its last byte (the x coordinate), as a
    // random wrong share does one time in 256.
    const real = Buffer.from(keys[0]!, "base64");
    const forged = Buffer.from(real);
    forged[0] = forged[0]! ^ 0xff;
    await vault.unseal(keys[0]!);
    await expect(vault.unseal(forged.toString("base64"))).rejects.toMatchObject({ status: 400, field: "key", message: expect.stringMatching(/progress is reset/) });
    expect((await vault.status()).progress).toBe(0);
    await vault.unseal(keys[1]!);
    expect((await vault.unseal(keys[2]!)).sealed).toBe(false);
  });

  it("refuses malformed shares without counting them", async () => {
    const vault = new Vault(newStore());
    const { keys } = await vault.init(2, 2);
    for (const bad of ["", "not base64!", keys[0]!.slice(4), Buffer.alloc(33).toString("base64").slice(0, -1)]) {
      await expect(vault.unseal(bad)).rejects.toMatchObject({ status: 400, field: "key" });
    }
    expect((await vault.status()).progress).toBe(0);
  });

  it("supports threshold 1 and checks the root token", async () => {
    const vault = new Vault(newStore());
    const { keys, rootToken } = await vault.init(2, 1);
    expect(keys[0]).toBe(keys[1]);
    expect((await vault.unseal(keys[0]!)).sealed).toBe(false);
    await expect(vault.verifyRootToken(undefined)).rejects.toMatchObject({ status: 401 });
    await expect(vault.verifyRootToken(`${rootToken}x`)).rejects.toMatchObject({ status: 401 });
    await expect(vault.verifyRootToken(rootToken)).resolves.toBeUndefined();
  });
});
