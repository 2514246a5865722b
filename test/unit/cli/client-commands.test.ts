// Argument checks of the client commands: each bad command line is a UsageError (exit code 2 from
// main) that says what is wrong, raised before any request is made.
import { describe, expect, it } from "vitest";
import { run as apply } from "../../../cli/commands/apply.ts";
import { run as del } from "../../../cli/commands/delete.ts";
import { run as events } from "../../../cli/commands/events.ts";
import { run as get } from "../../../cli/commands/get.ts";
import { run as nodes } from "../../../cli/commands/nodes.ts";
import { run as scale } from "../../../cli/commands/scale.ts";
import { UsageError } from "../../../cli/options.ts";

describe("client command lines", () => {
  it.each([
    ["apply", apply, [], "-f FILE is required"],
    ["apply", apply, ["-f", "g.yaml", "extra"], 'unexpected argument "extra"'],
    ["apply", apply, ["-f", "/nonexistent-capstan/hello.yaml"], "-f /nonexistent-capstan/hello.yaml: the file does not exist"],
    ["get", get, [], "what to get: podgroup NAME, podgroups or depends [NAME]"],
    ["get", get, ["pods"], 'unknown resource "pods": use podgroup NAME, podgroups or depends [NAME]'],
    ["get", get, ["depends", "a", "b"], 'unexpected argument "b"'],
    ["get", get, ["podgroups", "hello"], '"podgroups" lists every group; to show one: capstan get podgroup hello'],
    ["get", get, ["podgroup", "hello", "-o", "yaml"], '-output: "yaml" is not table or json'],
    ["scale", scale, ["hello"], "NAME and N are required, e.g. capstan scale hello 3"],
    ["scale", scale, ["hello", "three"], 'N: "three" is not a whole number >= 0'],
    ["scale", scale, ["hello", "-1"], "N: the count must be >= 0 (got -1)"],
    ["nodes", nodes, ["-o", "yaml"], '-output: "yaml" is not table or json'],
    ["events", events, ["-o", "wide"], '-output: "wide" is not table or json'],
    ["delete", del, ["hello"], 'what to delete: podgroup NAME (not "hello")'],
    ["delete", del, ["podgroup"], "NAME is required, e.g. capstan delete podgroup hello"],
    ["delete", del, ["podgroup", "a", "b"], 'unexpected argument "b"'],
    ["scale", scale, ["hello", "3", "-timeout", "5"], '-timeout: invalid duration "5": use a number with a unit, e.g. 500ms, 10s, 5m, 1h'],
  ] as const)("%s %j: %s", async (_name, command, argv, message) => {
    await expect(command([...argv])).rejects.toThrow(new UsageError(message));
  });
});
