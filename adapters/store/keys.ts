// Argument checks and key-range arithmetic shared by both stores, so that bad input fails the same
// way (with the same typed error) whichever store is behind the interface, before anything is sent.
import type { Compare, Op } from "./store.ts";

/** Keys are compared as UTF-8 bytes, as etcd compares them; both stores order and range on these. */
export function keyBytes(key: string): Buffer {
  return Buffer.from(key, "utf8");
}

/**
 * The first key after every key that starts with `prefix`, or null when no such key exists (empty
 * prefix, or a prefix of only 0xff bytes): the exclusive end of the prefix's key range.
 */
export function prefixRangeEnd(prefix: Buffer): Buffer | null {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i] = end[i]! + 1;
      return end.subarray(0, i + 1);
    }
  }
  return null;
}

export function assertKey(key: unknown, what = "key"): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    throw new TypeError(`${what} must be a non-empty string, got ${JSON.stringify(key)}`);
  }
}

export function assertValue(value: unknown): asserts value is string {
  if (typeof value !== "string") throw new TypeError(`value must be a string, got ${typeof value}`);
}

export function assertPrefix(prefix: unknown): asserts prefix is string {
  if (typeof prefix !== "string") throw new TypeError(`prefix must be a string, got ${typeof prefix}`);
}

/** A revision argument: a positive safe integer (revision 1 is an empty store's first revision). */
export function assertRevision(revision: unknown, what = "revision"): asserts revision is number {
  if (typeof revision !== "number" || !Number.isSafeInteger(revision) || revision < 1) {
    throw new RangeError(`${what} must be a positive integer, got ${String(revision)}`);
  }
}

/** Lease ids are decimal strings of etcd's 64-bit ids; "0" means "no lease" and is not a lease. */
export function assertLeaseId(lease: unknown): asserts lease is string {
  if (typeof lease !== "string" || !/^[1-9][0-9]{0,19}$/.test(lease)) {
    throw new TypeError(`lease must be a decimal lease id, got ${JSON.stringify(lease)}`);
  }
}

/** etcd's MaxLeaseTTL (server/lease/lessor.go): a longer grant fails there with "too large lease TTL". */
export const MAX_LEASE_TTL_SECONDS = 9_000_000_000;

export function assertTtl(ttlSeconds: unknown): asserts ttlSeconds is number {
  if (typeof ttlSeconds !== "number" || !Number.isSafeInteger(ttlSeconds) || ttlSeconds < 1) {
    throw new RangeError(`lease TTL must be a positive whole number of seconds, got ${String(ttlSeconds)}`);
  }
  if (ttlSeconds > MAX_LEASE_TTL_SECONDS) {
    throw new RangeError(`lease TTL must be at most ${MAX_LEASE_TTL_SECONDS} seconds (etcd's maximum), got ${ttlSeconds}`);
  }
}

export function assertCompares(compares: Compare[]): void {
  if (!Array.isArray(compares)) throw new TypeError("compares must be an array");
  for (const c of compares) {
    assertKey(c.key, "compare key");
    switch (c.target) {
      case "modRevision":
      case "createRevision":
      case "version":
        if (!Number.isSafeInteger(c.equals) || c.equals < 0) {
          throw new RangeError(`compare ${c.target} of ${c.key} must be an integer >= 0, got ${String(c.equals)}`);
        }
        break;
      case "value":
        assertValue(c.equals);
        break;
      case "lease":
        if (c.equals !== "0") assertLeaseId(c.equals);
        break;
      default:
        throw new TypeError(`unknown compare target ${JSON.stringify((c as { target: unknown }).target)}`);
    }
  }
}

/**
 * Checks one branch of a transaction the way etcd does (server/etcdserver/api/v3rpc/key.go
 * checkRequestPut / checkIntervals): a key may be put at most once, and no put may fall inside a
 * delete of the same branch, because the outcome would depend on op order. Overlapping deletes are
 * fine. An empty deletePrefix prefix is refused: "delete the whole store" is never what a caller
 * means, and it would remove other components' keys.
 */
export function assertOps(ops: Op[]): void {
  if (!Array.isArray(ops)) throw new TypeError("ops must be an array");
  const puts = new Set<string>();
  const deletes: { start: Buffer; end: Buffer | null; single: boolean }[] = [];
  for (const op of ops) {
    switch (op.type) {
      case "put":
        assertKey(op.key);
        assertValue(op.value);
        if (op.lease !== undefined) assertLeaseId(op.lease);
        if (puts.has(op.key)) throw new TypeError(`duplicate put of key ${op.key} in one transaction`);
        puts.add(op.key);
        break;
      case "delete":
        assertKey(op.key);
        deletes.push({ start: keyBytes(op.key), end: null, single: true });
        break;
      case "deletePrefix": {
        assertPrefix(op.prefix);
        if (op.prefix === "") throw new TypeError("deletePrefix needs a non-empty prefix");
        const start = keyBytes(op.prefix);
        deletes.push({ start, end: prefixRangeEnd(start), single: false });
        break;
      }
      default:
        throw new TypeError(`unknown op type ${JSON.stringify((op as { type: unknown }).type)}`);
    }
  }
  for (const key of puts) {
    const k = keyBytes(key);
    for (const d of deletes) {
      const inside = d.single
        ? k.equals(d.start)
        : k.compare(d.start) >= 0 && (d.end === null || k.compare(d.end) < 0);
      if (inside) throw new TypeError(`key ${key} is both put and deleted in one transaction`);
    }
  }
}

/** A list/watch prefix after validation, as a byte range [start, end) (end null = unbounded). */
export function prefixRange(prefix: string): { start: Buffer; end: Buffer | null } {
  assertPrefix(prefix);
  const start = keyBytes(prefix);
  return { start, end: prefixRangeEnd(start) };
}
