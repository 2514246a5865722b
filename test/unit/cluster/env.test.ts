import { describe, expect, it } from "vitest";
import { patchEnv } from "../../../adapters/cluster/env.ts";

describe("patchEnv", () => {
  it("replaces a key in place and leaves the input untouched", () => {
    const env = ["A=1", "B=2", "C=3"];
    expect(patchEnv(env, "B", "x=y")).toEqual(["A=1", "B=x=y", "C=3"]);
    expect(env).toEqual(["A=1", "B=2", "C=3"]);
  });

  it("appends a missing key", () => {
    expect(patchEnv(["A=1"], "B", "")).toEqual(["A=1", "B="]);
    expect(patchEnv([], "B", "2")).toEqual(["B=2"]);
  });

  it("drops later duplicates, which would otherwise override the patch, and matches bare keys", () => {
    expect(patchEnv(["B", "A=1", "B=old", "BB=keep"], "B", "new")).toEqual(["B=new", "A=1", "BB=keep"]);
  });

  it("rejects keys the engine cannot hold", () => {
    expect(() => patchEnv([], "", "v")).toThrow(RangeError);
    expect(() => patchEnv([], "A=B", "v")).toThrow(/must be non-empty/);
  });
});
