// How a PUT body becomes a record (docs/secrets.md, "Input rules"): the record form, or the whole body as content.
import { describe, expect, it } from "vitest";
import { ApiError } from "../../../api/http/index.ts";
import { recordFromBody } from "../../../api/secrets/params.ts";

const defaults = { owner: "root", group: "root", mode: "400" };

describe("recordFromBody", () => {
  it.each([
    ["plain text", "hello\nworld"],
    ["empty", ""],
    ["a JSON array", "[1,2]"],
    ["a JSON string", "\"s\""],
    ["null", "null"],
    ["an object without content", "{\"password\":\"x\"}"],
    ["an object whose content is not a string", "{\"content\":5,\"mode\":\"x\"}"],
    ["broken JSON", "{\"content\":"],
  ])("stores %s whole", (_what, body) => {
    expect(recordFromBody(body)).toEqual({ content: body, ...defaults });
  });

  it("reads the record form with defaults and given fields", () => {
    expect(recordFromBody("{\"content\":\"c\"}")).toEqual({ content: "c", ...defaults });
    expect(recordFromBody("{\"content\":\"c\",\"owner\":\"root\",\"group\":\"0\",\"mode\":\"0640\"}")).toEqual({ content: "c", owner: "root", group: "0", mode: "0640" });
  });

  it.each([
    ["{\"content\":\"c\",\"mode\":\"8\"}", "mode"],
    ["{\"content\":\"c\",\"mode\":\"0777x\"}", "mode"],
    ["{\"content\":\"c\",\"mode\":400}", "mode"],
    ["{\"content\":\"c\",\"owner\":\"\"}", "owner"],
    ["{\"content\":\"c\",\"owner\":\"app\"}", "owner"],
    ["{\"content\":\"c\",\"group\":\"1000\"}", "group"],
    ["{\"content\":\"c\",\"mode\":\"7777\"}", "mode"],
    ["{\"content\":\"c\",\"mode\":\"4755\"}", "mode"],
    ["{\"content\":\"c\",\"mode\":\"1644\"}", "mode"],
    ["{\"content\":\"c\",\"group\":\"a/b\"}", "group"],
    ["{\"content\":\"c\",\"extra\":1}", "extra"],
  ])("refuses %s naming %s", (body, field) => {
    let caught: unknown;
    try {
      recordFromBody(body);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect((caught as ApiError).status).toBe(400);
    expect((caught as ApiError).body).toMatchObject({ details: [{ path: field }] });
  });
});
