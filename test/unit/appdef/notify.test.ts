// The definition's notify map (docs/deploy.md, docs/notify.md): kinds and targets the orchestrator
// accepts as the app's routes, every problem named by line and key.
import { describe, expect, it } from "vitest";
import { AppDefinitionError, parseAppDefinition } from "../../../api/appdef/index.ts";

const problems = (text: string): string[] => {
  try {
    parseAppDefinition(text, "app.yaml");
  } catch (e) {
    if (e instanceof AppDefinitionError) return e.problems;
    throw e;
  }
  return [];
};

describe("notify in app.yaml", () => {
  it("maps channel kinds to targets", () => {
    const { definition } = parseAppDefinition('appname: shop\nnotify:\n  slack: "#shop-alerts"\n  ops-hook: ops\n', "app.yaml");
    expect(definition.notify).toEqual({ slack: "#shop-alerts", "ops-hook": "ops" });
  });
  it("refuses a kind that is not a lower-case word and an empty or over-long target, by line and key", () => {
    expect(problems("appname: shop\nnotify:\n  Slack: x\n")).toEqual([expect.stringMatching(/^app\.yaml:3: notify\.Slack: a channel kind must be a lower-case word/)]);
    expect(problems('appname: shop\nnotify:\n  slack: ""\n')).toEqual(["app.yaml:3: notify.slack: must not be empty"]);
    expect(problems(`appname: shop\nnotify:\n  slack: ${"x".repeat(257)}\n`)).toEqual([expect.stringMatching(/^app\.yaml:3: notify\.slack: must be a channel name of 1\.\.256 characters/)]);
    expect(problems("appname: shop\nnotify:\n  slack: [a]\n")).toHaveLength(1);
  });
});
