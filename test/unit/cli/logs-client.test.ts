// OrchestratorClient.logs against an in-process HTTP server: the query it sends, NDJSON records
// split anywhere by the transport, error answers, an answer that never comes, a stream that breaks
// off, and a stop that ends the request.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OrchestratorClient, type LogEntry } from "../../../cli/client.ts";
import { ApiError, ServerUnreachableError } from "../../../cli/http-errors.ts";
import { HttpClient } from "../../../cli/http-client.ts";

describe("OrchestratorClient.logs", () => {
  let server: Server;
  let base = "";
  let handle: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  const closed: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.socket.once("close", () => closed.push(req.url ?? ""));
      handle(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const records: LogEntry[] = [
    { instance: 0, container: 0, node: "n1", stream: "stdout", line: "héllo 😀" },
    { instance: 1, container: 0, node: "n2", stream: "stderr", time: "2026-11-23T01:05:11.768123456Z", line: "" },
    { instance: 1, container: 0, node: "n2", error: "engine unreachable" },
  ];

  it("asks for NDJSON with the query, and yields every record however the body is cut", async () => {
    const body = Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(""), "utf8");
    let seen: { url: string; accept: string | undefined; token: string | undefined } | undefined;
    for (const cut of [1, 7, 40, body.length]) {
      handle = (req, res) => {
        seen = { url: req.url!, accept: req.headers.accept, token: req.headers["access-token"] as string | undefined };
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        for (let i = 0; i < body.length; i += cut) res.write(body.subarray(i, i + cut));
        res.end();
      };
      const client = new OrchestratorClient({ server: base, token: "cst_t" });
      const got: LogEntry[] = [];
      for await (const r of client.logs("web", { instance: 1, follow: true, tail: 5, since: "10m", timestamps: true }, new AbortController().signal)) got.push(r);
      expect(got, `cut every ${cut} bytes`).toEqual(records);
    }
    expect(seen).toEqual({ url: "/api/podgroups/logs?name=web&instance=1&follow=true&tail=5&since=10m&timestamps=true", accept: "application/x-ndjson", token: "cst_t" });
  });

  it("turns an error answer into an ApiError", async () => {
    handle = (_req, res) => {
      res.writeHead(400, { "content-type": "application/json" }).end('{"code":"BadRequest","message":"invalid query parameters: tail: must be a non-negative integer","details":[{"path":"tail","message":"must be a non-negative integer"}]}');
    };
    const client = new OrchestratorClient({ server: base });
    const err = await (async () => {
      for await (const _ of client.logs("web", {}, new AbortController().signal));
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, code: "BadRequest", details: [{ path: "tail", message: "must be a non-negative integer" }] });
  });

  it("gives up on an answer that does not come within the request timeout and the grace", async () => {
    handle = () => undefined; // never answers
    const http = new HttpClient({ server: base, component: "orchestrator", requestTimeoutMs: 50 });
    const err = await http.stream("/api/podgroups/logs?name=web", "application/x-ndjson", new AbortController().signal, 25).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerUnreachableError);
    expect((err as Error).message).toMatch(/no answer within 75 ms/);
  });

  it("reports a stream the server breaks off, and stops the request when the signal aborts", async () => {
    handle = (_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify(records[0])}\n`);
      setImmediate(() => res.socket?.destroy());
    };
    const client = new OrchestratorClient({ server: base });
    const got: LogEntry[] = [];
    const err = await (async () => {
      for await (const r of client.logs("broken", {}, new AbortController().signal)) got.push(r);
    })().catch((e: unknown) => e);
    expect(got).toEqual([records[0]]);
    expect(err).toBeInstanceOf(ServerUnreachableError);
    expect((err as Error).message).toMatch(/the answer broke off/);

    handle = (_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify(records[0])}\n`); // and then nothing: a quiet follow
    };
    const stop = new AbortController();
    const reading = (async () => {
      for await (const _ of client.logs("quiet", { follow: true }, stop.signal)) stop.abort(new Error("enough"));
    })().catch((e: unknown) => e);
    expect(await reading).toBeDefined();
    await expect.poll(() => closed.includes("/api/podgroups/logs?name=quiet&follow=true")).toBe(true);
  });
});
