// readJson under @hono/node-server, where it reads the Node request directly (api/http/body.ts):
// the same answers as the web-stream path (test/unit/api/http.test.ts), over a real loopback
// socket in this process: declared and chunked bodies, the limit enforced while reading a chunked
// body with the 400 still delivered, and the server healthy afterwards.
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorHandler, readJson } from "../../../api/http/index.ts";
import { silentLogger } from "../../../runtime/log.ts";

const limit = 64;
let server: ServerType;
let base = "";

/** One request on a connection of its own; `chunks` are written one by one (chunked when no length). */
function send(chunks: string[], headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/echo`, { method: "POST", agent: false, timeout: 5_000, headers: { "content-type": "application/json", ...headers } }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("timeout", () => req.destroy(new Error("no answer in 5 s")));
    // The server may close the connection once it has answered a body it refused.
    req.on("error", (e: NodeJS.ErrnoException) => (e.code === "EPIPE" ? undefined : reject(e)));
    for (const c of chunks) req.write(c);
    req.end();
  });
}

beforeAll(async () => {
  const app = new Hono();
  app.onError(errorHandler(silentLogger));
  app.post("/echo", async (c) => c.json({ got: await readJson(c, { limitBytes: limit }) }));
  await new Promise<void>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
      base = `http://127.0.0.1:${info.port}`;
      resolve();
    });
  });
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("readJson on a Node request", () => {
  it("parses a body with a declared length", async () => {
    const body = JSON.stringify({ a: 1, s: "é" });
    const res = await send([body], { "content-length": String(Buffer.byteLength(body)) });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ got: { a: 1, s: "é" } });
  });

  it("parses a chunked body delivered in several pieces", async () => {
    const res = await send(['{"a":', '"b', 'c"}']);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ got: { a: "bc" } });
  });

  it("refuses a chunked body over the limit with a 400 that reaches the client, and keeps serving", async () => {
    const piece = "x".repeat(limit / 2);
    const res = await send([`"${piece}`, piece, piece, piece, `"`]);
    expect(res.status).toBe(400);
    expect((JSON.parse(res.text) as { message: string }).message).toBe(`request body exceeds ${limit} bytes`);
    const after = await send(["[1]"]);
    expect(after.status).toBe(200);
  });

  it("answers 400 for an empty body and for malformed JSON", async () => {
    expect((await send([], { "content-length": "0" })).status).toBe(400);
    const bad = await send(["{nope"]);
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/malformed JSON/);
  });
});
