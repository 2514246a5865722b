// `capstan registry gc-policy set|list|get|delete` on an SQLite store in a temporary directory:
// what it prints, its exit codes, and that an invalid file writes nothing.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { gcPolicyCommand } from "../../../cli/commands/registry-gc-policy.ts";
import { UsageError } from "../../../cli/options.ts";
import { policyPrefix } from "../../../controllers/registrygc/policy.ts";

let dir: string;
let db: string;
let url: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-gc-policy-"));
  db = join(dir, "state.db");
  url = `sqlite://${db}`;
  // The registry creates its store at its first start; the command refuses a store that is not there.
  await new SqliteStore({ path: db }).close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** Run the command, capturing what it prints. */
async function run(argv: string[], stdin?: NodeJS.ReadableStream): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => ((out += String(chunk)), true));
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => ((err += String(chunk)), true));
  try {
    const code = stdin === undefined ? await gcPolicyCommand(argv) : await gcPolicyCommand(argv, stdin);
    return { code, out, err };
  } finally {
    vi.restoreAllMocks();
  }
}

function file(name: string, content: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content, null, 2));
  return path;
}

async function storedKeys(): Promise<string[]> {
  const store = new SqliteStore({ path: db });
  try {
    return (await store.list(policyPrefix)).items.map((kv) => kv.key);
  } finally {
    await store.close();
  }
}

const shop = {
  name: "shop",
  repositories: "shop/**",
  keepNewest: { groups: ["^release-", "^prepare-", "^meta-", "^build-"], count: 50 },
  keepNewerThanDays: 30,
  deleteUntagged: true,
  intervalSeconds: 86400,
};

describe("capstan registry gc-policy", () => {
  it("sets, lists, gets and deletes policies", async () => {
    expect(await run(["set", file("shop.json", shop), "-store", url])).toEqual({ code: 0, out: "gc-policy shop created\n", err: "" });
    expect(await run(["set", file("shop.json", shop), "-store", url])).toEqual({ code: 0, out: "gc-policy shop unchanged\n", err: "" });
    expect(await run(["set", file("shop.json", { ...shop, keepNewerThanDays: 7 }), "-store", url])).toEqual({ code: 0, out: "gc-policy shop updated\n", err: "" });
    const fromStdin = await run(["set", "-", "-store", url], Readable.from([JSON.stringify({ name: "untagged", repositories: "**", deleteUntagged: true })]));
    expect(fromStdin).toEqual({ code: 0, out: "gc-policy untagged created\n", err: "" });

    const list = await run(["list", "-store", url]);
    expect(list.code).toBe(0);
    expect(list.out.split("\n")).toEqual([
      "NAME      REPOSITORIES  KEEP NEWEST                                       NEWER THAN  DELETE UNTAGGED  BLOB GRACE  RUNS",
      "shop      shop/**       50 of each of ^release- ^prepare- ^meta- ^build-  7d          after 1d         1h          every 1d",
      "untagged  **            -                                                 -           after 1d         1h          on request",
      "",
    ]);
    const json = await run(["list", "-json", "-store", url]);
    expect(JSON.parse(json.out)).toEqual([{ ...shop, keepNewerThanDays: 7 }, { name: "untagged", repositories: "**", deleteUntagged: true }]);

    const got = await run(["get", "shop", "-store", url]);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.out)).toEqual({ ...shop, keepNewerThanDays: 7 });
    // what get prints, set takes back unchanged
    expect(await run(["set", file("again.json", got.out), "-store", url])).toMatchObject({ code: 0, out: "gc-policy shop unchanged\n" });

    expect(await run(["delete", "shop", "-store", url])).toEqual({ code: 0, out: "gc-policy shop deleted\n", err: "" });
    expect(await run(["delete", "shop", "-store", url])).toEqual({ code: 1, out: "", err: "capstan registry gc-policy delete: no GC policy shop\n" });
    expect(await run(["get", "shop", "-store", url])).toEqual({ code: 1, out: "", err: "capstan registry gc-policy get: no GC policy shop\n" });
    expect(await run(["delete", "untagged", "-store", url])).toMatchObject({ code: 0 });
    expect(await run(["list", "-store", url])).toEqual({ code: 0, out: "no GC policies\n", err: "" });
  });

  it("refuses an invalid file with exit code 2, naming each field, and writes nothing", async () => {
    const bad = file("bad.json", { ...shop, name: "bad", keepNewest: { groups: ["^release-", "(build"], count: -1 }, colour: "red" });
    const result = await run(["set", bad, "-store", url]);
    expect(result.code).toBe(2);
    expect(result.out).toBe("");
    expect(result.err.split("\n")).toEqual([
      `capstan registry gc-policy set: ${bad} is not a valid GC policy:`,
      "  keepNewest.groups[1]: not a valid regular expression: /(build/: Unterminated group",
      "  keepNewest.count: must be >= 0",
      "  colour: unknown field",
      "",
    ]);
    const notJson = await run(["set", file("not.json", "{ name: shop"), "-store", url]);
    expect(notJson.code).toBe(2);
    expect(notJson.err).toMatch(/is not a valid GC policy:\n {2}not JSON: /);
    const missing = await run(["set", join(dir, "missing.json"), "-store", url]);
    expect(missing).toMatchObject({ code: 2, err: expect.stringContaining("cannot read it (ENOENT)") });
    expect(await storedKeys()).toEqual([]);
  });

  it("names stored records that are not valid policies", async () => {
    const store = new SqliteStore({ path: db });
    await store.put(`${policyPrefix}broken`, "{");
    await store.close();
    const list = await run(["list", "-store", url]);
    expect(list.code).toBe(0);
    expect(list.out).toBe("no GC policies\n");
    expect(list.err).toMatch(/^capstan registry gc-policy list: stored policy broken is not valid and is ignored: policy: not JSON/);
    expect(await run(["get", "broken", "-store", url])).toMatchObject({ code: 1, err: expect.stringContaining("stored policy broken is not valid") });
    expect(await run(["delete", "broken", "-store", url])).toMatchObject({ code: 0, out: "gc-policy broken deleted\n" });
  });

  it.each([
    [["set", "x.json"], /^-store URL is required: the registry's store/],
    [["list", "-store", "sqlite:///nonexistent-capstan-dir/state.db"], /^-store sqlite:\/\/\/nonexistent-capstan-dir\/state\.db: there is no store at/],
    [["list", "-store", "redis://x"], /^-store: invalid store URL "redis:\/\/x": unknown scheme/],
    [["get", "-store", "sqlite://:memory:"], /^gc-policy get: NAME is required/],
    [["get", "Shop", "-store", "sqlite://:memory:"], /^gc-policy get: NAME "Shop" is no policy name/],
    [["delete", "a", "b", "-store", "sqlite://:memory:"], /^gc-policy delete: unexpected argument "b"/],
    [["list", "extra", "-store", "sqlite://:memory:"], /^gc-policy list: unexpected argument "extra"/],
    [["remove", "x"], /^gc-policy: unknown sub-command "remove": use set, list, get or delete/],
    [["list", "-colour"], /^unknown option -colour/],
  ])("%j is a usage error", async (argv, message) => {
    await expect(run(argv)).rejects.toThrow(UsageError);
    await expect(run(argv)).rejects.toThrow(message);
  });

  it("prints help", async () => {
    expect(await run(["-h"])).toMatchObject({ code: 0, out: expect.stringContaining("capstan registry gc-policy set FILE.json|-") });
    expect(await run(["set", "-h"])).toMatchObject({ code: 0, out: expect.stringContaining("usage: capstan registry gc-policy set [options] FILE.json|-") });
    expect(await run([])).toMatchObject({ code: 2 });
  });
});
