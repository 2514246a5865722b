// The retention decision: a prepared repository with tags in the release-, prepare-, meta- and
// build- groups and outside them, checked tag by tag; ties, in-use protection by tag and by digest,
// keepNewerThanDays, repositories the policy does not cover, and the order of the answer.
import { describe, expect, it } from "vitest";
import { InUse } from "../../../controllers/registrygc/in-use.ts";
import { parsePolicy, type GcPolicy } from "../../../controllers/registrygc/policy.ts";
import { compareNatural, tagsToRemove, type TagInfo } from "../../../controllers/registrygc/retention.ts";

const day = 86_400_000;
const now = Date.UTC(2026, 0, 31, 4, 0, 0);
const digest = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;
let next = 1;
const tag = (repository: string, name: string, ageDays: number, d = digest(next++)): TagInfo => ({ repository, tag: name, digest: d, pushedAt: now - ageDays * day });

function policy(fields: Partial<GcPolicy>): GcPolicy {
  const parsed = parsePolicy({ name: "shop", repositories: "shop/**", ...fields });
  if (!parsed.ok) throw new Error(parsed.problems.join("; "));
  return parsed.policy;
}

const groups = ["release-", "prepare-", "meta-", "build-"];
const apiDigest = digest(0xa91);

const tags: TagInfo[] = [
  // shop/web, release-: the newest 2 are kept; release-2 is run by a PodGroup; 3 and 1 go.
  tag("shop/web", "release-1", 50),
  tag("shop/web", "release-2", 40),
  tag("shop/web", "release-3", 30),
  tag("shop/web", "release-4", 20),
  tag("shop/web", "release-5", 5),
  // unanchored: this one is in the release- group too, and the oldest of it.
  tag("shop/web", "x-release-9", 400),
  // prepare-
  tag("shop/web", "prepare-1", 60),
  tag("shop/web", "prepare-2", 3),
  tag("shop/web", "prepare-3", 2),
  // meta-: meta-build-1 matches meta- before build- (the first group it matches)
  tag("shop/web", "meta-a", 100),
  tag("shop/web", "meta-build-1", 2),
  // build-: 5 and 4 are the newest; 3 is a candidate pushed 8 days ago (< 10 days): kept.
  tag("shop/web", "build-1", 30),
  tag("shop/web", "build-2", 25),
  tag("shop/web", "build-3", 8),
  tag("shop/web", "build-4", 7),
  tag("shop/web", "build-5", 1),
  // no group: never removed by keepNewest, however old
  tag("shop/web", "latest", 200),
  tag("shop/web", "v1.0", 300),
  // shop/api: release-1 is used by digest by a dependency
  tag("shop/api", "release-0", 110),
  tag("shop/api", "release-1", 100, apiDigest),
  tag("shop/api", "release-2", 90),
  tag("shop/api", "release-3", 80),
  // not under shop/: untouched
  tag("other/app", "release-1", 500),
  tag("other/app", "release-2", 400),
  tag("other/app", "release-3", 300),
  tag("shop", "release-1", 500),
];

const inUse = InUse.of([
  { user: "podgroup shop.web.web", images: ["127.0.0.1:5000/shop/web:release-2"] },
  { user: "dependency api-cache", images: [`registry.example:5000/shop/api@${apiDigest}`] },
  { user: "podgroup other.app.web", images: ["other/app:latest"] },
]);

const names = (ts: TagInfo[]) => ts.map((t) => `${t.repository}:${t.tag}`);

describe("tagsToRemove", () => {
  const rule = policy({ keepNewest: { groups, count: 2 }, keepNewerThanDays: 10 });

  it("removes exactly the old tags of each group beyond the newest count, and says why every other tag stays", () => {
    const decision = tagsToRemove(rule, tags, inUse, now);
    expect(names(decision.remove)).toEqual([
      "shop/api:release-0",
      "shop/web:build-1",
      "shop/web:build-2",
      "shop/web:prepare-1",
      "shop/web:release-1",
      "shop/web:release-3",
      "shop/web:x-release-9",
    ]);
    expect(Object.fromEntries(decision.keep.map((k) => [`${k.tag.repository}:${k.tag.tag}`, k.reason]))).toEqual({
      "shop/api:release-1": "in use by dependency api-cache",
      "shop/api:release-2": "one of the newest 2 of group release-",
      "shop/api:release-3": "one of the newest 2 of group release-",
      "shop/web:build-3": "pushed less than 10 days ago (keepNewerThanDays)",
      "shop/web:build-4": "one of the newest 2 of group build-",
      "shop/web:build-5": "one of the newest 2 of group build-",
      "shop/web:latest": "matches no keepNewest group",
      "shop/web:meta-a": "one of the newest 2 of group meta-",
      "shop/web:meta-build-1": "one of the newest 2 of group meta-",
      "shop/web:prepare-2": "one of the newest 2 of group prepare-",
      "shop/web:prepare-3": "one of the newest 2 of group prepare-",
      "shop/web:release-2": "in use by podgroup shop.web.web",
      "shop/web:release-4": "one of the newest 2 of group release-",
      "shop/web:release-5": "one of the newest 2 of group release-",
      "shop/web:v1.0": "matches no keepNewest group",
    });
  });

  it("never touches repositories the glob does not match (other/app, and shop itself for shop/**)", () => {
    const decision = tagsToRemove(rule, tags, inUse, now);
    const touched = [...decision.remove, ...decision.keep.map((k) => k.tag)];
    expect(touched.filter((t) => !t.repository.startsWith("shop/"))).toEqual([]);
    expect(touched).toHaveLength(tags.filter((t) => t.repository.startsWith("shop/")).length);
  });

  it("is deterministic: any order of the input gives the same, sorted answer", () => {
    const expected = tagsToRemove(rule, tags, inUse, now);
    for (const seed of [1, 2, 3, 4, 5]) {
      const shuffled = [...tags].sort((a, b) => ((hash(a.tag + a.repository, seed) - hash(b.tag + b.repository, seed)) | 0));
      expect(tagsToRemove(rule, shuffled, inUse, now)).toEqual(expected);
    }
    expect(tagsToRemove(rule, [...tags].reverse(), inUse, now)).toEqual(expected);
  });

  it("breaks ties of pushedAt by tag name, descending in natural order", () => {
    const same = [tag("shop/tie", "build-9", 40), tag("shop/tie", "build-10", 40), tag("shop/tie", "build-8", 40), tag("shop/tie", "build-08", 40)];
    const decision = tagsToRemove(policy({ keepNewest: { groups: ["^build-"], count: 1 } }), same, InUse.of([]), now);
    expect(decision.keep.map((k) => k.tag.tag)).toEqual(["build-10"]);
    expect(names(decision.remove)).toEqual(["shop/tie:build-08", "shop/tie:build-8", "shop/tie:build-9"]);
    // build-8 and build-08 are equal as numbers: code-unit order decides, so the order is total.
    const two = tagsToRemove(policy({ keepNewest: { groups: ["^build-"], count: 1 } }), same.slice(2), InUse.of([]), now);
    expect(two.keep.map((k) => k.tag.tag)).toEqual(["build-8"]);
  });

  it("keeps candidates pushed less than keepNewerThanDays ago, and removes them once older", () => {
    const t = [tag("shop/web", "build-1", 9.99), tag("shop/web", "build-2", 10), tag("shop/web", "build-3", 0)];
    const decision = tagsToRemove(policy({ keepNewest: { groups, count: 0 }, keepNewerThanDays: 10 }), t, InUse.of([]), now);
    expect(names(decision.remove)).toEqual(["shop/web:build-2"]);
    expect(decision.keep.map((k) => k.tag.tag)).toEqual(["build-1", "build-3"]);
    // count 0 without keepNewerThanDays: every tag of a group is a candidate
    expect(names(tagsToRemove(policy({ keepNewest: { groups, count: 0 } }), t, InUse.of([]), now).remove)).toEqual(["shop/web:build-1", "shop/web:build-2", "shop/web:build-3"]);
  });

  it("keeps a candidate in use by tag or by digest, under any registry host", () => {
    const t = [tag("shop/web", "release-1", 90, digest(7)), tag("shop/web", "release-2", 80), tag("shop/web", "release-3", 70)];
    const zero = policy({ keepNewest: { groups, count: 0 } });
    const byTag = tagsToRemove(zero, t, InUse.of([{ user: "podgroup shop.web.web", images: ["registry.example:5000/shop/web:release-3"] }]), now);
    expect(byTag.keep).toEqual([{ tag: t[2], reason: "in use by podgroup shop.web.web" }]);
    const byDigest = tagsToRemove(zero, t, InUse.of([{ user: "dependency cache", images: [`shop/web@${digest(7)}`] }]), now);
    expect(byDigest.keep).toEqual([{ tag: t[0], reason: "in use by dependency cache" }]);
  });

  it("removes nothing without keepNewest, keepNewerThanDays alone included", () => {
    for (const p of [policy({}), policy({ keepNewerThanDays: 0 }), policy({ keepNewerThanDays: 1, deleteUntagged: true })]) {
      const decision = tagsToRemove(p, tags, InUse.of([]), now);
      expect(decision.remove).toEqual([]);
      expect(new Set(decision.keep.map((k) => k.reason))).toEqual(new Set(["the policy has no keepNewest rule"]));
    }
  });

  it("keeps everything while a workload record is unreadable", () => {
    const blocked = InUse.of([], [{ key: "/platform/orchestrator/podgroups/bad", user: "podgroup bad", reason: "not JSON" }]);
    const decision = tagsToRemove(rule, tags, blocked, now);
    expect(decision.remove).toEqual([]);
    expect(decision.keep.find((k) => k.tag.tag === "x-release-9")?.reason).toMatch(/^in use by podgroup bad \(unreadable record/);
  });
});

describe("compareNatural", () => {
  it("orders digit runs as numbers and is total", () => {
    const sorted = ["b", "build-10", "build-9", "build-08", "build-8", "build-1a", "build-1", "a", "build-99999999999999999999", "build-100000000000000000000"].sort(compareNatural);
    expect(sorted).toEqual(["a", "b", "build-1", "build-1a", "build-08", "build-8", "build-9", "build-10", "build-99999999999999999999", "build-100000000000000000000"]);
  });
});

/** A small deterministic hash, to shuffle reproducibly. */
function hash(s: string, seed: number): number {
  let h = seed * 2654435761;
  for (const c of s) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return h;
}
