// GC policies: validation whose every problem names its field, repository globs, and the records
// in the store (put, list, get, delete; records written behind Capstan's back).
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import {
  defaultGraceSeconds,
  defaultUntaggedGraceSeconds,
  deletePolicy,
  getPolicy,
  graceSecondsOf,
  listPolicies,
  parsePolicy,
  policyKey,
  policyPrefix,
  putPolicy,
  repositoryMatches,
  untaggedGraceSecondsOf,
  type GcPolicy,
} from "../../../controllers/registrygc/policy.ts";

const stores: SqliteStore[] = [];
const newStore = () => {
  const s = new SqliteStore({ path: ":memory:" });
  stores.push(s);
  return s;
};
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

const full = {
  name: "shop",
  repositories: "shop/**",
  keepNewest: { groups: ["release-", "prepare-", "meta-", "build-"], count: 50 },
  keepNewerThanDays: 30,
  deleteUntagged: true,
  untaggedGraceSeconds: 3600,
  graceSeconds: 7200,
  intervalSeconds: 86400,
};

const problemsOf = (json: unknown) => {
  const parsed = parsePolicy(json);
  return parsed.ok ? [] : parsed.problems;
};

describe("parsePolicy", () => {
  it("accepts a full policy and a minimal one, defaults filled in by the helpers", () => {
    expect(parsePolicy(full)).toEqual({ ok: true, policy: full });
    const minimal = parsePolicy({ name: "all", repositories: "**" });
    expect(minimal).toEqual({ ok: true, policy: { name: "all", repositories: "**" } });
    if (!minimal.ok) return;
    expect(untaggedGraceSecondsOf(minimal.policy)).toBe(defaultUntaggedGraceSeconds);
    expect(graceSecondsOf(minimal.policy)).toBe(defaultGraceSeconds);
    expect([defaultUntaggedGraceSeconds, defaultGraceSeconds]).toEqual([86400, 3600]);
  });

  it.each([
    [{ ...full, keepNewest: { groups: ["release-", "(unclosed"], count: 5 } }, /^keepNewest\.groups\[1\]: not a valid regular expression: .*Unterminated group/],
    [{ ...full, keepNewest: { groups: ["release-", ""], count: 5 } }, /^keepNewest\.groups\[1\]: must not be empty/],
    [{ ...full, keepNewest: { groups: [], count: 5 } }, /^keepNewest\.groups: needs at least one group/],
    [{ ...full, keepNewest: { groups: ["a"], count: -1 } }, /^keepNewest\.count: must be >= 0$/],
    [{ ...full, keepNewest: { groups: ["a"], count: 1.5 } }, /^keepNewest\.count: must be a whole number$/],
    [{ ...full, keepNewest: { groups: ["a"] } }, /^keepNewest\.count: is required$/],
    [{ ...full, keepNewest: { groups: ["a"], count: 1, keep: 2 } }, /^keepNewest\.keep: unknown field$/],
    [{ ...full, name: "Shop" }, /^name: must be 1-63 characters/],
    [{ ...full, name: "-shop" }, /^name: must be 1-63 characters/],
    [{ ...full, name: "a".repeat(64) }, /^name: must be 1-63 characters/],
    [{ ...full, repositories: "Shop/*" }, /^repositories: must be a repository name pattern/],
    [{ ...full, repositories: "shop//web" }, /^repositories: must be a repository name pattern/],
    [{ ...full, repositories: "/shop" }, /^repositories: must be a repository name pattern/],
    [{ name: "x" }, /^repositories: is required$/],
    [{ ...full, keepNewerThanDays: -1 }, /^keepNewerThanDays: must be >= 0$/],
    [{ ...full, deleteUntagged: "yes" }, /^deleteUntagged: expected boolean, received string$/],
    [{ ...full, untaggedGraceSeconds: -5 }, /^untaggedGraceSeconds: must be >= 0$/],
    [{ ...full, graceSeconds: 0.5 }, /^graceSeconds: must be a whole number of seconds$/],
    [{ ...full, intervalSeconds: 0 }, /^intervalSeconds: must be >= 1$/],
    [{ ...full, keepnewest: { groups: ["a"], count: 1 } }, /^keepnewest: unknown field$/],
    [["not", "an", "object"], /^policy: expected object, received array$/],
  ])("%j: names the field", (json, problem) => {
    const problems = problemsOf(json);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(problem);
  });

  it("lists every problem, each by field", () => {
    expect(problemsOf({ name: "", repositories: "", keepNewest: { groups: ["ok", "["], count: -2 }, graceSeconds: -1 }).map((p) => p.split(":")[0])).toEqual([
      "name",
      "repositories",
      "keepNewest.groups[1]",
      "keepNewest.count",
      "graceSeconds",
    ]);
  });
});

describe("repositoryMatches", () => {
  it.each([
    ["**", "shop", true],
    ["**", "shop/web/x", true],
    ["shop/**", "shop/web", true],
    ["shop/**", "shop/web/api", true],
    ["shop/**", "shop", false],
    ["shop/**", "shopping/web", false],
    ["shop/*", "shop/web", true],
    ["shop/*", "shop/web/api", false],
    ["shop/*/api", "shop/web/api", true],
    ["shop/*/api", "shop/web/x/api", false],
    ["shop/**/api", "shop/api", true],
    ["shop/**/api", "shop/web/x/api", true],
    ["**/web", "web", true],
    ["**/web", "a/b/web", true],
    ["**/web", "a/bweb", false],
    ["shop/web-*", "shop/web-api", true],
    ["shop/web-*", "shop/web", false],
    ["shop/web", "shop/web", true],
    ["shop/web", "shop/web2", false],
    ["shop.io/web", "shopxio/web", false],
    ["*", "shop", true],
    ["*", "shop/web", false],
  ])("%s ~ %s: %s", (glob, name, matches) => {
    expect(repositoryMatches(glob, name)).toBe(matches);
  });
});

describe("policy records", () => {
  const other: GcPolicy = { name: "all-untagged", repositories: "**", deleteUntagged: true };

  it("puts, lists in name order, gets and deletes", async () => {
    const store = newStore();
    expect(await putPolicy(store, full)).toBe("created");
    expect(await putPolicy(store, other)).toBe("created");
    expect(await putPolicy(store, { ...full })).toBe("unchanged");
    expect(await putPolicy(store, { ...full, keepNewerThanDays: 7 })).toBe("updated");
    expect(JSON.parse((await store.get("/platform/registry/gc/policies/shop"))!.value)).toEqual({ ...full, keepNewerThanDays: 7 });
    expect(await listPolicies(store)).toEqual({ policies: [other, { ...full, keepNewerThanDays: 7 }], invalid: [] });
    expect(await getPolicy(store, "shop")).toEqual({ ok: true, policy: { ...full, keepNewerThanDays: 7 } });
    expect(await getPolicy(store, "nope")).toBeNull();
    expect(await deletePolicy(store, "shop")).toBe(true);
    expect(await deletePolicy(store, "shop")).toBe(false);
    expect(await listPolicies(store)).toEqual({ policies: [other], invalid: [] });
  });

  it("refuses to store an invalid policy, naming the field", async () => {
    const store = newStore();
    await expect(putPolicy(store, { ...full, keepNewest: { groups: ["("], count: 1 } })).rejects.toThrow(/keepNewest\.groups\[0\]: not a valid regular expression/);
    expect((await store.list(policyPrefix)).items).toEqual([]);
  });

  it("reports records written behind its back that do not parse, and acts on none of them", async () => {
    const store = newStore();
    await putPolicy(store, other);
    await store.put(`${policyPrefix}broken`, "{not json");
    await store.put(`${policyPrefix}bad-regex`, JSON.stringify({ name: "bad-regex", repositories: "**", keepNewest: { groups: ["("], count: 1 } }));
    await store.put(`${policyPrefix}renamed`, JSON.stringify({ name: "original", repositories: "**" }));
    const { policies, invalid } = await listPolicies(store);
    expect(policies).toEqual([other]);
    expect(invalid.map((i) => i.name)).toEqual(["bad-regex", "broken", "renamed"]);
    expect(invalid[0]!.problems[0]).toMatch(/^keepNewest\.groups\[0\]: not a valid regular expression/);
    expect(invalid[1]!.problems[0]).toMatch(/^policy: not JSON/);
    expect(invalid[2]!.problems).toEqual(['name: "original" differs from the name in its key (renamed)']);
    expect(await getPolicy(store, "broken")).toMatchObject({ ok: false });
  });

  it("keys only valid names", () => {
    expect(policyKey("shop")).toBe("/platform/registry/gc/policies/shop");
    expect(() => policyKey("../x")).toThrow(TypeError);
    expect(() => policyKey("a/b")).toThrow(/must be 1-63 characters/);
  });
});
