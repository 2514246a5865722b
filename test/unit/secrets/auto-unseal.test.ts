// Auto-unseal (docs/secrets.md, "Auto-unseal"): the unseal key file's mode and owner check, its
// format, and the start-up decision on a private in-memory store with real files in a temp dir.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { autoUnseal, rootTokenFileOf } from "../../../api/secrets/auto-unseal.ts";
import { formatUnsealFile, parseUnsealFile, readUnsealFile, UnsealFileError, unsealFileProblem, writePrivateFile, writeUnsealFile } from "../../../api/secrets/unseal-file.ts";
import type * as UnsealFileModule from "../../../api/secrets/unseal-file.ts";
import { Vault } from "../../../api/secrets/vault.ts";
import { silentLogger } from "../../../runtime/log.ts";

// The real module, with writePrivateFile made to fail once where a test says so.
vi.mock("../../../api/secrets/unseal-file.ts", async (original) => {
  const real = await original<typeof UnsealFileModule>();
  return { ...real, writePrivateFile: vi.fn(real.writePrivateFile) };
});

const dir = mkdtempSync(join(tmpdir(), "capstan-unseal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const stores: SqliteStore[] = [];
const newStore = () => {
  const s = new SqliteStore({ path: ":memory:" });
  stores.push(s);
  return s;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});
let n = 0;
/** A path in a new private directory; the file does not exist yet. */
const fileName = () => {
  const d = join(dir, `key-${++n}`);
  mkdirSync(d, { mode: 0o700 });
  return join(d, "unseal-key");
};
const freshFile = fileName;

describe("unsealFileProblem", () => {
  const stat = (mode: number, uid = 1000, file = true) => ({ mode: 0o100000 | mode, uid, isFile: () => file });
  it("accepts 0600 and stricter, owned by the running user", () => {
    for (const mode of [0o600, 0o400, 0o200, 0o000]) expect(unsealFileProblem("/k", stat(mode), 1000)).toBeUndefined();
  });
  it("refuses any bit for group or others, naming the file and its mode", () => {
    expect(unsealFileProblem("/d/unseal-key", stat(0o644), 1000)).toBe("unseal key file /d/unseal-key has mode 0644: it must be 0600 or stricter (chmod 600 /d/unseal-key)");
    for (const mode of [0o640, 0o604, 0o610, 0o601, 0o660, 0o777]) expect(unsealFileProblem("/k", stat(mode), 1000)).toMatch(/has mode 0\d{3}: it must be 0600/);
  });
  it("refuses a file of another owner, and what is not a regular file", () => {
    expect(unsealFileProblem("/k", stat(0o600, 0), 1000)).toBe("unseal key file /k (mode 0600) is owned by uid 0, not by the user running capstan (uid 1000)");
    expect(unsealFileProblem("/k", stat(0o600, 1000, false), 1000)).toMatch(/not a regular file/);
  });
});

describe("the unseal key file format", () => {
  it("is one base64 share per line; comments and blank lines are skipped", () => {
    const keys = ["QUJD", "REVGRw==", "SElKS0w="];
    expect(parseUnsealFile("/k", formatUnsealFile(keys))).toEqual(keys);
    expect(parseUnsealFile("/k", "\n# shares\n  QUJD  \n\nREVGRw==\n")).toEqual(["QUJD", "REVGRw=="]);
  });
  it("refuses a file with no share or a line that is not base64, naming the line, not its content", () => {
    expect(() => parseUnsealFile("/k", "# nothing\n\n")).toThrow("unseal key file /k holds no key share");
    const bad = () => parseUnsealFile("/k", "QUJD\nnot a share!\n");
    expect(bad).toThrow(UnsealFileError);
    expect(bad).toThrow("unseal key file /k: line 2 is not a base64 key share");
    expect(bad).not.toThrow(/not a share/);
  });
  it("is written 0600 atomically, read back, and refused once it is 0644", () => {
    const file = freshFile();
    expect(readUnsealFile(file)).toBeUndefined();
    writeUnsealFile(file, ["QUJD"]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readUnsealFile(file)).toEqual(["QUJD"]);
    chmodSync(file, 0o644);
    expect(() => readUnsealFile(file)).toThrow(`unseal key file ${file} has mode 0644`);
  });
});

describe("autoUnseal", () => {
  const opts = (file: string, required = false) => ({ file, initialize: true, required, log: silentLogger });

  it("initializes a new store, writes the key and the root token (0600) before unsealing, and a restart unseals from the file", async () => {
    const store = newStore();
    const file = freshFile();
    const vault = new Vault(store);
    expect(await autoUnseal(vault, opts(file))).toBe("initialized");
    expect(vault.sealed()).toBe(false);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(rootTokenFileOf(file)).mode & 0o777).toBe(0o600);
    const rootToken = readFileSync(rootTokenFileOf(file), "utf8").trim();
    await vault.verifyRootToken(rootToken);
    const sealed = await vault.encrypt("a", "a.web.w", "p", { content: "x", owner: "root", group: "root", mode: "400" });

    const restarted = new Vault(store);
    expect(await autoUnseal(restarted, opts(file))).toBe("unsealed");
    expect(restarted.decrypt("a", "a.web.w", "p", sealed).content).toBe("x");
  });

  it("a key file that cannot be written stops the start and leaves the store uninitialized", async () => {
    const store = newStore();
    const file = join(dir, "no-such-dir", "unseal-key");
    await expect(autoUnseal(new Vault(store), opts(file))).rejects.toThrow(`cannot write unseal key file ${file}`);
    expect((await new Vault(store).status()).initialized).toBe(false);
  });

  it("a root token that cannot be written leaves no key file behind (the init did not happen)", async () => {
    const store = newStore();
    const file = freshFile();
    vi.mocked(writePrivateFile).mockImplementationOnce(() => {
      throw new Error("ENOSPC: no space left on device");
    });
    await expect(autoUnseal(new Vault(store), opts(file))).rejects.toThrow(`cannot write unseal key file ${file} or ${rootTokenFileOf(file)}`);
    expect(existsSync(file)).toBe(false);
    expect((await new Vault(store).status()).initialized).toBe(false);
  });

  it("never replaces a key file that appeared while it initialized, and on losing the init race removes only its own", async () => {
    // The file appears between the read and the write: another process initializing with it.
    const store = newStore();
    const file = freshFile();
    const vault = new Vault(store);
    const init = vault.init.bind(vault);
    vault.init = (shares, threshold, beforeCommit) => {
      writeFileSync(file, "theirs\n", { mode: 0o600 });
      return init(shares, threshold, beforeCommit);
    };
    await expect(autoUnseal(vault, opts(file))).rejects.toThrow(/it appeared meanwhile/);
    expect(readFileSync(file, "utf8")).toBe("theirs\n");
    expect((await new Vault(store).status()).initialized).toBe(false);

    // Another process commits its init first: this one's file is removed, the store keeps theirs.
    const store2 = newStore();
    const file2 = freshFile();
    const loser = new Vault(store2);
    const init2 = loser.init.bind(loser);
    loser.init = (shares, threshold, beforeCommit) =>
      init2(shares, threshold, async (material) => {
        await beforeCommit?.(material);
        await new Vault(store2).init(1, 1); // the winner commits between our write and our commit
      });
    await expect(autoUnseal(loser, opts(file2))).rejects.toThrow(`another process initialized the secrets service first: give its unseal key file as ${file2}`);
    expect(existsSync(file2)).toBe(false);
    expect((await new Vault(store2).status()).initialized).toBe(true);
  });

  it("unseals with the threshold shares an operator wrote from init's output", async () => {
    const store = newStore();
    const { keys } = await new Vault(store).init(5, 3);
    const file = freshFile();
    writeFileSync(file, `${keys[4]}\n${keys[1]}\n${keys[2]}\n`, { mode: 0o600 });
    const vault = new Vault(store);
    expect(await autoUnseal(vault, opts(file, true))).toBe("unsealed");
    expect(vault.sealed()).toBe(false);
  });

  it("refuses too few shares, wrong shares, a missing file it was told to use, and a file of another store", async () => {
    const store = newStore();
    const { keys } = await new Vault(store).init(3, 2);
    const file = freshFile();
    writeFileSync(file, `${keys[0]}\n`, { mode: 0o600 });
    await expect(autoUnseal(new Vault(store), opts(file))).rejects.toThrow(`unseal key file ${file} holds 1 distinct key share(s); this store's secrets service needs 2`);

    const other = newStore();
    const otherKeys = (await new Vault(other).init(3, 2)).keys;
    writeFileSync(file, `${otherKeys[0]}\n${otherKeys[1]}\n`, { mode: 0o600 });
    await expect(autoUnseal(new Vault(store), opts(file))).rejects.toThrow(/its shares do not unseal this store's secrets service/);

    const missing = fileName();
    await expect(autoUnseal(new Vault(store), opts(missing, true))).rejects.toThrow(`unseal key file ${missing} does not exist and the secrets service is already initialized`);
    // up's default: a data directory from before auto-unseal only warns and stays sealed.
    const vault = new Vault(store);
    expect(await autoUnseal(vault, opts(missing, false))).toBe("sealed");
    expect(vault.sealed()).toBe(true);

    await expect(autoUnseal(new Vault(newStore()), opts(file, true))).rejects.toThrow(/exists but the secrets service on this store is not initialized/);
  });

  it("capstan up's default file of an init that never committed is moved aside, and the service initializes anew", async () => {
    const store = newStore();
    const file = freshFile();
    writeUnsealFile(file, ["QUJD"]); // written, then killed before the init was recorded
    writeFileSync(rootTokenFileOf(file), "old-root\n", { mode: 0o600 });
    const vault = new Vault(store);
    expect(await autoUnseal(vault, { ...opts(file), required: false })).toBe("initialized");
    expect(vault.sealed()).toBe(false);
    const kept = readdirSync(dirname(file)).filter((n) => n.includes(".unused-")).sort();
    expect(kept).toHaveLength(2); // the old key file and the old root token, both kept
    expect(kept.map((n) => readFileSync(join(dirname(file), n), "utf8"))).toEqual(expect.arrayContaining(["old-root\n", formatUnsealFile(["QUJD"])]));
    expect(await autoUnseal(new Vault(store), opts(file))).toBe("unsealed");
  });

  it("the loser of an init race unseals from the winner's file when it is the same one, else names it", async () => {
    const store = newStore();
    const file = freshFile();
    const loser = new Vault(store);
    const init = loser.init.bind(loser);
    // The winner, using the same file, records its init after the loser found no file.
    loser.init = async (shares, threshold, beforeCommit) => {
      await autoUnseal(new Vault(store), opts(file));
      return init(shares, threshold, beforeCommit);
    };
    expect(await autoUnseal(loser, opts(file))).toBe("unsealed");
    expect(loser.sealed()).toBe(false);

    const store2 = newStore();
    const elsewhere = freshFile();
    const loser2 = new Vault(store2);
    const init2 = loser2.init.bind(loser2);
    loser2.init = async (shares, threshold, beforeCommit) => {
      await new Vault(store2).init(1, 1); // a process on another machine, its file there
      return init2(shares, threshold, beforeCommit);
    };
    await expect(autoUnseal(loser2, opts(elsewhere))).rejects.toThrow(`another process initialized the secrets service first: give its unseal key file as ${elsewhere}`);
    expect(existsSync(elsewhere)).toBe(false);
  });

  it("a FIFO in place of the file is refused at once, not waited on", async () => {
    const file = freshFile();
    execFileSync("mkfifo", ["-m", "600", file]);
    expect(() => readUnsealFile(file)).toThrow(`unseal key file ${file} is not a regular file`);
  });

  it("reads shares from a file with CRLF line ends", () => {
    const file = freshFile();
    writeFileSync(file, "# shares\r\nQUJD\r\nREVGRw==\r\n", { mode: 0o600 });
    expect(readUnsealFile(file)).toEqual(["QUJD", "REVGRw=="]);
  });
});
