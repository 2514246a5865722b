// The manager's server takes WebSocket upgrades for routes that accept them (@hono/node-server's
// upgradeWebSocket; GET /api/podgroups/exec is one), over HTTP and over HTTPS alike, and its stop
// ends open WebSockets along with the other connections.
import { readFileSync } from "node:fs";
import { upgradeWebSocket } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { answerRefusedUpgrade } from "../../../api/orchestrator/exec.ts";
import { Manager } from "../../../runtime/manager.ts";
import { makePki, type Pki } from "../../helpers/certs.ts";

let pki: Pki;
let tls: { cert: string; key: string };

beforeAll(async () => {
  pki = await makePki();
  const issued = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
  tls = { cert: readFileSync(issued.cert, "utf8"), key: readFileSync(issued.key, "utf8") };
});

afterAll(async () => {
  await pki?.remove();
});

function echoManager(withTls: boolean): Manager {
  const manager = new Manager({ name: "ws", http: { port: 0 }, ...(withTls && { tls }) });
  manager.app.get("/echo", (c) =>
    upgradeWebSocket(c, {
      onMessage: (evt, ws) => ws.send(`echo ${String(evt.data)}`),
    }),
  );
  // A refusal as exec answers one: status, headers and JSON body, before any upgrade.
  manager.app.use("/refuse", answerRefusedUpgrade);
  manager.app.get("/refuse", (c) => c.json({ code: "Forbidden", message: "no" }, 403, { "x-why": "test" }));
  return manager;
}

describe.each([
  ["HTTP", false],
  ["HTTPS", true],
])("Manager WebSockets over %s", (_scheme, withTls) => {
  it("upgrades a route that accepts it, and ends the socket on stop", async () => {
    const manager = echoManager(withTls);
    await manager.start();
    const { port } = manager.address()!;
    const ws = new WebSocket(`${withTls ? "wss" : "ws"}://127.0.0.1:${port}/echo`, withTls ? { ca: readFileSync(pki.ca, "utf8") } : {});
    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    const answer = new Promise<string>((resolve) => ws.once("message", (d: Buffer) => resolve(d.toString())));
    ws.send("hi");
    expect(await answer).toBe("echo hi");

    const started = Date.now();
    await manager.stop();
    expect(await closed).toBe(1006); // cut: the server went, without a close frame
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await manager.finished()).code).toBe(0);
  });

  it("answers a route that does not upgrade with its status", async () => {
    const manager = echoManager(withTls);
    await manager.start();
    const { port } = manager.address()!;
    const ws = new WebSocket(`${withTls ? "wss" : "ws"}://127.0.0.1:${port}/healthz`, withTls ? { ca: readFileSync(pki.ca, "utf8") } : {});
    const status = await new Promise<number>((resolve, reject) => {
      ws.once("unexpected-response", (req, res) => {
        req.destroy();
        resolve(res.statusCode ?? 0);
      });
      ws.once("open", () => reject(new Error("upgraded")));
    });
    expect(status).toBe(200);
    await manager.stop();
  });

  it("gives a refused handshake its whole answer, JSON body included", async () => {
    const manager = echoManager(withTls);
    await manager.start();
    const { port } = manager.address()!;
    const ws = new WebSocket(`${withTls ? "wss" : "ws"}://127.0.0.1:${port}/refuse`, withTls ? { ca: readFileSync(pki.ca, "utf8") } : {});
    const answer = await new Promise<{ status: number; type: string; why: string; body: string }>((resolve, reject) => {
      ws.once("unexpected-response", (req, res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), why: String(res.headers["x-why"]), body });
        });
      });
      ws.once("open", () => reject(new Error("upgraded")));
    });
    expect(answer).toEqual({ status: 403, type: "application/json", why: "test", body: '{"code":"Forbidden","message":"no"}' });
    await manager.stop();
  });
});
