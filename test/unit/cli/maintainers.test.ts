import { describe, expect, it } from "vitest";
import { addMaintainers, emailArgs, removeMaintainers } from "../../../cli/maintainers.ts";

describe("apps maintainers add|remove: the new list", () => {
  it("reads e-mails from several arguments, comma-separated, trimmed, lower case, once each", () => {
    expect(emailArgs(["Carol@Example.com", "dave@example.com, carol@example.com", ","])).toEqual(["carol@example.com", "dave@example.com"]);
  });

  it("adds the new ones after the old, and says which were there already", () => {
    expect(addMaintainers("hello", ["alice@example.com"], ["bob@example.com", "alice@example.com"])).toEqual({
      changed: true,
      maintainers: ["alice@example.com", "bob@example.com"],
      note: "app hello: added bob@example.com; alice@example.com was already maintainer",
    });
    expect(addMaintainers("hello", ["alice@example.com"], ["alice@example.com"])).toMatchObject({ changed: false, maintainers: ["alice@example.com"] });
  });

  it("removes, says who was not there, and keeps at least one maintainer", () => {
    expect(removeMaintainers("hello", ["alice@example.com", "bob@example.com"], ["alice@example.com", "zed@example.com"])).toEqual({
      changed: true,
      maintainers: ["bob@example.com"],
      note: "app hello: removed alice@example.com; zed@example.com was not a maintainer",
    });
    expect(removeMaintainers("hello", ["alice@example.com"], ["zed@example.com"])).toMatchObject({ changed: false, maintainers: ["alice@example.com"] });
    expect(removeMaintainers("hello", ["alice@example.com", "bob@example.com"], ["alice@example.com", "bob@example.com"])).toEqual({
      error: "app hello would have no maintainer left (it has alice@example.com, bob@example.com); add the new one first (capstan apps maintainers add)",
    });
  });
});
