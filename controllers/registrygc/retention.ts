// Which tags a GC policy removes (docs/registry-gc.md, "Which tags are removed"). Pure:
// the tags, what workloads use and the clock come in, the decision goes out; the collector removes
// the tags and reports the decision.
//
// For each tag of a repository that matches the policy's `repositories` glob (tags of any other
// repository are in neither list of the answer):
//
// 1. Without `keepNewest` the tag is kept: a policy removes tags only by counting them.
//    `keepNewerThanDays` alone therefore removes nothing (it protects candidates, it selects none).
// 2. The tag belongs to the FIRST of `keepNewest.groups` whose regular expression it matches. The
//    expressions are used as given with RegExp.test, so unanchored ("release-" matches
//    "v1-release-2"), as the original cleanup script's grep was; anchor them ("^release-") to mean
//    a prefix. A tag that matches no group is kept.
// 3. Within one repository and group, tags are ordered newest first by `pushedAt`, ties broken by
//    tag name in descending natural order (digit runs compare as numbers, so "build-10" counts as
//    newer than "build-9"; then plain code-unit order, so the order is total). The first
//    `keepNewest.count` are kept; the rest are candidates.
// 4. A candidate pushed less than `keepNewerThanDays` days before `now` is kept (one pushed "in the
//    future", a skewed clock, too).
// 5. A candidate that a workload uses, by tag or by the digest it points at, is kept; the reason
//    names the workload ("in use by podgroup shop.web.web").
// 6. Every other candidate is removed.
//
// Removing a tag removes that tag only: the manifest stays while another tag points at it, and
// becomes untagged (for `deleteUntagged`) only when none does. Both lists are sorted by repository,
// then tag, so the same input always gives the same answer.
import type { InUse } from "./in-use.ts";
import { repositoryMatches, type GcPolicy } from "./policy.ts";

export interface TagInfo {
  repository: string;
  tag: string;
  /** The digest the tag points at. */
  digest: string;
  /** ms since epoch: the modification time of the tag's current link (when it was last pushed). */
  pushedAt: number;
}

export interface RetentionDecision {
  remove: TagInfo[];
  /** Every other tag of a matching repository, with why it stays. */
  keep: { tag: TagInfo; reason: string }[];
}

/** What the decision needs of InUse (tests may pass their own). */
export type InUseLookup = Pick<InUse, "usedBy">;

const dayMs = 86_400_000;

export function tagsToRemove(policy: GcPolicy, tags: readonly TagInfo[], inUse: InUseLookup, now: number): RetentionDecision {
  const remove: TagInfo[] = [];
  const keep: { tag: TagInfo; reason: string }[] = [];
  const mine = tags.filter((t) => repositoryMatches(policy.repositories, t.repository));
  const rule = policy.keepNewest;
  if (rule === undefined) {
    for (const tag of mine) keep.push({ tag, reason: "the policy has no keepNewest rule" });
    return sorted(remove, keep);
  }

  const groups = rule.groups.map((source, i) => {
    try {
      return new RegExp(source);
    } catch (e) {
      throw new TypeError(`policy ${policy.name}: keepNewest.groups[${i}]: not a valid regular expression: ${(e as Error).message.replace(/^Invalid regular expression: /, "")}`);
    }
  });
  // repository -> group index -> its tags
  const buckets = new Map<string, Map<number, TagInfo[]>>();
  for (const tag of mine) {
    const group = groups.findIndex((re) => re.test(tag.tag));
    if (group < 0) {
      keep.push({ tag, reason: "matches no keepNewest group" });
      continue;
    }
    let byGroup = buckets.get(tag.repository);
    if (byGroup === undefined) buckets.set(tag.repository, (byGroup = new Map()));
    let bucket = byGroup.get(group);
    if (bucket === undefined) byGroup.set(group, (bucket = []));
    bucket.push(tag);
  }

  const days = policy.keepNewerThanDays;
  for (const byGroup of buckets.values()) {
    for (const [group, bucket] of byGroup) {
      bucket.sort(newestFirst);
      bucket.forEach((tag, rank) => {
        if (rank < rule.count) {
          keep.push({ tag, reason: `one of the newest ${rule.count} of group ${rule.groups[group]}` });
          return;
        }
        if (days !== undefined && now - tag.pushedAt < days * dayMs) {
          keep.push({ tag, reason: `pushed less than ${days} days ago (keepNewerThanDays)` });
          return;
        }
        const user = inUse.usedBy(tag.repository, tag.tag, tag.digest);
        if (user !== undefined) {
          keep.push({ tag, reason: `in use by ${user}` });
          return;
        }
        remove.push(tag);
      });
    }
  }
  return sorted(remove, keep);
}

/** Newest first: later pushedAt, then the greater tag name in natural order. */
function newestFirst(a: TagInfo, b: TagInfo): number {
  return b.pushedAt - a.pushedAt || compareNatural(b.tag, a.tag);
}

/**
 * Natural order of tag names: runs of digits compare as numbers ("9" < "10"), everything else by
 * code unit; names that are equal so ("01" and "1") fall back to code-unit order, so the order is
 * total and the decision does not depend on the input's order.
 */
export function compareNatural(a: string, b: string): number {
  const pa = a.match(/\d+|\D+/g) ?? [];
  const pb = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    if (/^\d/.test(x) && /^\d/.test(y)) {
      // As numbers without converting (tags may hold digit runs beyond 2^53): length, then digits.
      const nx = x.replace(/^0+(?=\d)/, "");
      const ny = y.replace(/^0+(?=\d)/, "");
      if (nx.length !== ny.length) return nx.length - ny.length;
      if (nx !== ny) return nx < ny ? -1 : 1;
      continue;
    }
    return x < y ? -1 : 1;
  }
  if (pa.length !== pb.length) return pa.length - pb.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

function byRepositoryAndTag(a: TagInfo, b: TagInfo): number {
  if (a.repository !== b.repository) return a.repository < b.repository ? -1 : 1;
  return a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0;
}

function sorted(remove: TagInfo[], keep: { tag: TagInfo; reason: string }[]): RetentionDecision {
  remove.sort(byRepositoryAndTag);
  keep.sort((a, b) => byRepositoryAndTag(a.tag, b.tag));
  return { remove, keep };
}
