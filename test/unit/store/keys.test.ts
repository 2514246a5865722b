import { describe, expect, it } from "vitest";
import { assertCompares, assertOps, assertTtl, prefixRangeEnd } from "../../../adapters/store/keys.ts";
import { serverAnswersProgressInOrder } from "../../../adapters/store/etcd.ts";

describe("prefixRangeEnd", () => {
  it("increments the last byte that can be incremented", () => {
    expect(prefixRangeEnd(Buffer.from("a/"))).toEqual(Buffer.from("a0"));
    expect(prefixRangeEnd(Buffer.from([0x61, 0xff, 0xff]))).toEqual(Buffer.from([0x62]));
  });
  it("has no end for the empty prefix or all-0xff bytes", () => {
    expect(prefixRangeEnd(Buffer.alloc(0))).toBeNull();
    expect(prefixRangeEnd(Buffer.from([0xff, 0xff]))).toBeNull();
  });
});

describe("assertOps", () => {
  it("accepts disjoint puts and overlapping deletes", () => {
    expect(() =>
      assertOps([
        { type: "put", key: "/a", value: "1" },
        { type: "put", key: "/b", value: "1", lease: "123" },
        { type: "deletePrefix", prefix: "/c/" },
        { type: "delete", key: "/c/x" },
      ]),
    ).not.toThrow();
  });
  it("refuses a key put twice, a put inside a delete, an empty deletePrefix and bad leases", () => {
    expect(() => assertOps([{ type: "put", key: "/a", value: "1" }, { type: "put", key: "/a", value: "2" }])).toThrow(
      /duplicate put/,
    );
    expect(() => assertOps([{ type: "put", key: "/d/a", value: "1" }, { type: "deletePrefix", prefix: "/d/" }])).toThrow(
      /both put and deleted/,
    );
    expect(() => assertOps([{ type: "delete", key: "/a" }, { type: "put", key: "/a", value: "1" }])).toThrow(
      /both put and deleted/,
    );
    expect(() => assertOps([{ type: "deletePrefix", prefix: "" }])).toThrow(TypeError);
    expect(() => assertOps([{ type: "put", key: "/a", value: "1", lease: "0" }])).toThrow(TypeError);
    expect(() => assertOps([{ type: "put", key: "", value: "1" }])).toThrow(TypeError);
  });
});

describe("assertCompares", () => {
  it("refuses negative revisions, unknown targets and non-string values", () => {
    expect(() => assertCompares([{ key: "/a", target: "modRevision", equals: -1 }])).toThrow(RangeError);
    expect(() => assertCompares([{ key: "/a", target: "nope", equals: 1 } as never])).toThrow(TypeError);
    expect(() => assertCompares([{ key: "/a", target: "value", equals: 1 } as never])).toThrow(TypeError);
    expect(() => assertCompares([{ key: "/a", target: "lease", equals: "0" }])).not.toThrow();
  });
});

describe("serverAnswersProgressInOrder", () => {
  it("trusts WatchProgressRequest only on etcd releases with the ordering fixes", () => {
    expect(serverAnswersProgressInOrder("3.4.23")).toBe(false);
    expect(serverAnswersProgressInOrder("3.4.31")).toBe(true);
    expect(serverAnswersProgressInOrder("3.5.12")).toBe(false);
    expect(serverAnswersProgressInOrder("3.5.13")).toBe(true);
    expect(serverAnswersProgressInOrder("3.6.0")).toBe(true);
    expect(serverAnswersProgressInOrder("garbage")).toBe(false);
  });
});

describe("assertTtl", () => {
  it("accepts whole seconds from 1 up to etcd's MaxLeaseTTL (9e9 s) and refuses more", () => {
    expect(() => assertTtl(1)).not.toThrow();
    expect(() => assertTtl(9_000_000_000)).not.toThrow();
    expect(() => assertTtl(9_000_000_001)).toThrow(new RangeError("lease TTL must be at most 9000000000 seconds (etcd's maximum), got 9000000001"));
    expect(() => assertTtl(0)).toThrow(RangeError);
    expect(() => assertTtl(1.5)).toThrow(RangeError);
  });
});
