// The shared HTTP helpers (api/http), exercised through a Hono app in-process: JSON bodies (content
// type, size limit, UTF-8, syntax), schema errors that name fields, query parameters, and the
// mapping of thrown errors onto the bodies of docs/orchestrator.md, "Status codes and bodies".
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { StoreUnavailableError } from "../../../adapters/store/errors.ts";
import { maxJsonBodyBytes, readJson, readJsonBody } from "../../../api/http/body.ts";
import { accepted, errorHandler, notAllowed, notFound, notFoundHandler } from "../../../api/http/errors.ts";
import { parseQuery, queryBoolean, queryCount } from "../../../api/http/query.ts";
import { detailsOf, formatPath } from "../../../api/resources/issue-paths.ts";
import { silentLogger } from "../../../runtime/log.ts";

const Thing = z.strictObject({ name: z.string().min(1), count: z.number().int().nonnegative(), tags: z.array(z.string()).optional() });
const Query = z.object({ name: z.string().min(1), n: queryCount(10), flag: queryBoolean.optional() });

function app() {
  const a = new Hono();
  a.onError(errorHandler(silentLogger));
  a.notFound(notFoundHandler);
  a.post("/raw", async (c) => c.json({ got: await readJson(c) }));
  a.post("/small", async (c) => c.json({ got: await readJson(c, { limitBytes: 16 }) }));
  a.post("/thing", async (c) => c.json(await readJsonBody(c, Thing, "Thing")));
  a.get("/q", (c) => c.json(parseQuery(c, Query)));
  a.get("/store-down", () => {
    throw new StoreUnavailableError("etcd did not answer");
  });
  a.get("/deadline", () => {
    throw Object.assign(new Error("list did not complete within 10 ms"), { name: "DeadlineExceededError" });
  });
  a.get("/bug", () => {
    throw new Error("secret internals");
  });
  a.get("/missing", () => {
    throw notFound("thing x not found");
  });
  a.get("/exists", () => {
    throw notAllowed("AlreadyExists", "thing x exists");
  });
  a.post("/accept", (c) => accepted(c, "queued", "/check?name=x"));
  return a;
}

const post = (path: string, body: RequestInit["body"], headers: Record<string, string> = { "content-type": "application/json" }) =>
  app().request(path, { method: "POST", body, headers });

describe("readJson", () => {
  it("parses a JSON body, with or without a charset, and +json media types", async () => {
    for (const ct of ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"]) {
      const res = await post("/raw", '{"a":[1,2]}', { "content-type": ct });
      expect(res.status, ct).toBe(200);
      expect(await res.json()).toEqual({ got: { a: [1, 2] } });
    }
  });

  it.each([
    ["form-encoded", "application/x-www-form-urlencoded", "a=1", /content-type must be application\/json.*x-www-form-urlencoded/],
    ["text/plain", "text/plain", "{}", /content-type must be application\/json.*text\/plain/],
    ["multipart", "multipart/form-data; boundary=x", "--x--", /content-type/],
  ])("refuses a %s body naming the content type", async (_what, ct, body, message) => {
    const res = await post("/raw", body, { "content-type": ct });
    expect(res.status).toBe(400);
    const json = (await res.json()) as { code: string; message: string; details: { path: string }[] };
    expect(json.code).toBe("BadRequest");
    expect(json.message).toMatch(message);
    expect(json.details[0]?.path).toBe("content-type");
  });

  it("refuses a body without a content type", async () => {
    const res = await app().request("/raw", { method: "POST", body: new Uint8Array([123, 125]) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/content-type must be application\/json \(got none\)/);
  });

  it("refuses compressed bodies", async () => {
    const res = await post("/raw", "{}", { "content-type": "application/json", "content-encoding": "gzip" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/content-encoding gzip/);
  });

  it.each([
    ["empty", "", /body is empty/],
    ["malformed", '{"a":', /malformed JSON/],
    ["trailing garbage", '{"a":1} x', /malformed JSON/],
  ])("refuses an %s body", async (_what, body, message) => {
    const res = await post("/raw", body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { message: string; details: { path: string }[] };
    expect(json.message).toMatch(message);
    expect(json.details[0]?.path).toBe("body");
  });

  it("refuses invalid UTF-8", async () => {
    const res = await post("/raw", new Uint8Array([0x22, 0xff, 0xfe, 0x22]));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/not valid UTF-8/);
  });

  it("refuses a body over the limit, by declared length and by streamed length", async () => {
    const big = `"${"x".repeat(32)}"`;
    const declared = await post("/small", big, { "content-type": "application/json", "content-length": String(big.length) });
    expect(declared.status).toBe(400);
    expect(((await declared.json()) as { message: string }).message).toBe("request body exceeds 16 bytes");

    // No content-length: the limit is enforced while reading.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 4; i++) controller.enqueue(new TextEncoder().encode("xxxxxxxx"));
        controller.close();
      },
    });
    const streamed = await app().request("/small", { method: "POST", body: stream, headers: { "content-type": "application/json" }, duplex: "half" } as RequestInit);
    expect(streamed.status).toBe(400);
    expect(((await streamed.json()) as { message: string }).message).toBe("request body exceeds 16 bytes");

    // Exactly at the limit is fine.
    const exact = await post("/small", `"${"x".repeat(14)}"`);
    expect(exact.status).toBe(200);
  });

  it("has a 1 MiB default limit", async () => {
    expect(maxJsonBodyBytes).toBe(1 << 20);
    const over = await post("/raw", JSON.stringify({ pad: "y".repeat(maxJsonBodyBytes) }));
    expect(over.status).toBe(400);
    expect(((await over.json()) as { message: string }).message).toBe("request body exceeds 1 MiB");
    const under = await post("/raw", JSON.stringify({ pad: "y".repeat(maxJsonBodyBytes - 100) }));
    expect(under.status).toBe(200);
  });
});

describe("readJsonBody", () => {
  it("names every bad field in the message and details", async () => {
    const res = await post("/thing", JSON.stringify({ count: -1, tags: [1], extra: true, other: 2 }));
    expect(res.status).toBe(400);
    const json = (await res.json()) as { code: string; message: string; details: { path: string; message: string }[] };
    expect(json.code).toBe("BadRequest");
    expect(json.message).toMatch(/^invalid Thing: /);
    expect(json.details).toEqual(
      expect.arrayContaining([
        { path: "name", message: "is required" },
        { path: "count", message: expect.stringMatching(/>=0/) },
        { path: "tags[0]", message: "expected string, received number" },
        { path: "extra", message: "unknown field" },
        { path: "other", message: "unknown field" },
      ]),
    );
    for (const d of json.details) expect(json.message).toContain(d.path);
  });

  it("names the root when the body is not an object", async () => {
    const res = await post("/thing", "[1]");
    const json = (await res.json()) as { details: { path: string; message: string }[] };
    expect(json.details).toEqual([{ path: "body", message: "expected object, received array" }]);
  });

  it("returns the parsed value", async () => {
    const res = await post("/thing", JSON.stringify({ name: "a", count: 2 }));
    expect(await res.json()).toEqual({ name: "a", count: 2 });
  });
});

describe("parseQuery", () => {
  const get = (qs: string) => app().request(`/q?${qs}`);

  it("parses and converts parameters, ignoring ones it does not know", async () => {
    const res = await get("name=a&n=7&flag=TRUE&cachebuster=1");
    expect(await res.json()).toEqual({ name: "a", n: 7, flag: true });
  });

  it.each([
    ["n=1", "name", "is required"],
    ["name=a", "n", "is required"],
    ["name=a&n=-1", "n", "must be a non-negative integer"],
    ["name=a&n=1.5", "n", "must be a non-negative integer"],
    ["name=a&n=abc", "n", "must be a non-negative integer"],
    ["name=a&n=11", "n", "must be at most 10"],
    ["name=a&n=1&flag=yes", "flag", "must be true or false"],
  ])("?%s: 400 naming %s", async (qs, field, message) => {
    const res = await get(qs);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { message: string; details: { path: string; message: string }[] };
    expect(json.details).toContainEqual({ path: field, message });
    expect(json.message).toContain(`${field}: ${message}`);
  });

  it("refuses a parameter given twice", async () => {
    const res = await get("name=a&name=b&n=1");
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toBe("query parameter name is given 2 times; give it once");
  });
});

describe("errors", () => {
  it("maps ApiErrors to their status and body", async () => {
    const missing = await app().request("/missing");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ code: "NotFound", message: "thing x not found" });
    const exists = await app().request("/exists");
    expect(exists.status).toBe(409);
    expect(await exists.json()).toEqual({ code: "NotAllowed", reason: "AlreadyExists", message: "thing x exists" });
  });

  it("answers store timeouts with 503 and a retry hint", async () => {
    for (const path of ["/store-down", "/deadline"]) {
      const res = await app().request(path);
      expect(res.status, path).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as { code: string }).code).toBe("Unavailable");
    }
  });

  it("answers other errors with 500 without leaking their message", async () => {
    const res = await app().request("/bug");
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text).not.toContain("secret");
    expect(JSON.parse(text)).toMatchObject({ code: "InternalError" });
  });

  it("answers unknown routes with a NotFound body", async () => {
    const res = await app().request("/nowhere", { method: "DELETE" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ code: "NotFound", message: "no route for DELETE /nowhere" });
  });

  it("answers accepted requests with 202 {message, checkUrl}", async () => {
    const res = await app().request("/accept", { method: "POST" });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ message: "queued", checkUrl: "/check?name=x" });
  });
});

describe("validation formatting", () => {
  it("formats paths with dots and indexes", () => {
    expect(formatPath(["pod", "containers", 0, "image"])).toBe("pod.containers[0].image");
    expect(formatPath([])).toBe("body");
    expect(formatPath([], "query")).toBe("query");
    expect(formatPath([2, "a"])).toBe("[2].a");
  });

  it("splits unknown keys into one detail each", () => {
    const r = z.strictObject({ a: z.strictObject({}) }).safeParse({ a: { x: 1, y: 2 } });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(detailsOf(r.error)).toEqual([
        { path: "a.x", message: "unknown field" },
        { path: "a.y", message: "unknown field" },
      ]);
    }
  });
});
