import { describe, expect, it } from "vitest";
import { editNote, emailArgs } from "../../../cli/maintainers.ts";
import { editMaintainers } from "../../../api/console/maintainers.ts";

describe("apps maintainers add|remove", () => {
  it("reads e-mails from several arguments, comma-separated, trimmed, lower case, once each", () => {
    expect(emailArgs(["Carol@Example.com", "dave@example.com, carol@example.com", ","])).toEqual(["carol@example.com", "dave@example.com"]);
  });

  it("says who was added, and which were there already", () => {
    expect(editNote("hello", "add", ["bob@example.com", "alice@example.com"], { added: ["bob@example.com"], removed: [] })).toBe("app hello: added bob@example.com; alice@example.com was already maintainer");
    expect(editNote("hello", "add", ["a@example.com", "b@example.com"], { added: [], removed: [] })).toBe("app hello: nothing changed (a@example.com, b@example.com were already maintainers)");
  });

  it("says who was removed, and which were not maintainers", () => {
    expect(editNote("hello", "remove", ["alice@example.com", "zed@example.com"], { added: [], removed: ["alice@example.com"] })).toBe("app hello: removed alice@example.com; zed@example.com was not a maintainer");
    expect(editNote("hello", "remove", ["zed@example.com"], { added: [], removed: [] })).toBe("app hello: nothing changed (zed@example.com was not a maintainer)");
  });
});

describe("the console's maintainers edit (from the list as stored)", () => {
  it("appends the new ones after the old, once each, and removes", () => {
    expect(editMaintainers(["alice@example.com"], { add: ["bob@example.com", "alice@example.com", "bob@example.com"], remove: [] })).toEqual({
      maintainers: ["alice@example.com", "bob@example.com"],
      added: ["bob@example.com"],
      removed: [],
    });
    expect(editMaintainers(["alice@example.com", "bob@example.com"], { add: [], remove: ["alice@example.com", "zed@example.com"] })).toEqual({
      maintainers: ["bob@example.com"],
      added: [],
      removed: ["alice@example.com"],
    });
  });

  it("compares stored e-mails as the API stores them, and keeps to the most maintainers an app has", () => {
    expect(editMaintainers([" Alice@Example.com"], { add: ["alice@example.com"], remove: [] })).toMatchObject({ added: [] });
    expect(editMaintainers([" Alice@Example.com", "b@example.com"], { add: [], remove: ["alice@example.com"] })).toEqual({ maintainers: ["b@example.com"], added: [], removed: [" Alice@Example.com"] });
    const hundred = Array.from({ length: 100 }, (_, i) => `m${i}@example.com`);
    expect(editMaintainers(hundred, { add: ["x@example.com"], remove: [] })).toEqual({ field: "add", error: "would have 101 maintainers, more than 100" });
    expect(editMaintainers(hundred, { add: ["x@example.com"], remove: ["m0@example.com"] })).toMatchObject({ added: ["x@example.com"], removed: ["m0@example.com"] });
  });

  it("keeps at least one maintainer", () => {
    expect(editMaintainers(["alice@example.com", "bob@example.com"], { add: [], remove: ["alice@example.com", "bob@example.com"] })).toEqual({
      field: "remove",
      error: "would have no maintainer left (it has alice@example.com, bob@example.com): add the new one first",
    });
    // Adding the new one in the same edit is fine.
    expect(editMaintainers(["alice@example.com"], { add: ["carol@example.com"], remove: ["alice@example.com"] })).toMatchObject({ maintainers: ["carol@example.com"] });
  });
});
