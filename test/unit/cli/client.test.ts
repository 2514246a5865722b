// The client against an in-process HTTP server: request shapes, error bodies, timeouts.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OrchestratorClient } from "../../../cli/client.ts";
import { ApiError, ServerUnreachableError } from "../../../cli/http-errors.ts";

interface Seen {
  method: string;
  url: string;
  body: string;
  contentType: string | undefined;
}

describe("OrchestratorClient", () => {
  let server: Server;
  let base = "";
  const seen: Seen[] = [];
  let answer: (req: IncomingMessage) => { status: number; body: string } | "hang" = () => ({ status: 202, body: '{"message":"ok","checkUrl":"/x"}' });

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, body, contentType: req.headers["content-type"] });
        const a = answer(req);
        if (a === "hang") return;
        res.writeHead(a.status, { "content-type": "application/json" }).end(a.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("sends each operation as the API defines it", async () => {
    const client = new OrchestratorClient({ server: `${base}/` });
    seen.length = 0;
    await client.createPodGroup({ name: "a", namespace: "n", numInstances: 1, restartPolicy: "never", pod: { namespace: "n", containers: [{ image: "i" }] } });
    await client.updatePodSpec("a", { namespace: "n", containers: [{ image: "j" }] });
    await client.updateReplica("a", 3, "onfail");
    await client.updateReplica("a", 0);
    await client.deletePodGroup("a b");
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      "POST /api/podgroups",
      "PATCH /api/podgroups?name=a&cmd=spec",
      "PATCH /api/podgroups?name=a&cmd=replica&num_instances=3&restart_policy=onfail",
      "PATCH /api/podgroups?name=a&cmd=replica&num_instances=0",
      "DELETE /api/podgroups?name=a+b",
    ]);
    expect(JSON.parse(seen[1]!.body)).toEqual({ namespace: "n", containers: [{ image: "j" }] });
    expect(seen[0]!.contentType).toBe("application/json");
  });

  it("turns an error answer into an ApiError carrying the server's code, reason, message and details", async () => {
    const client = new OrchestratorClient({ server: base });
    answer = () => ({ status: 409, body: '{"code":"NotAllowed","reason":"AlreadyExists","message":"podgroup a exists; use PATCH"}' });
    const conflict = await client.createPodGroup({} as never).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(ApiError);
    expect((conflict as ApiError).describe()).toBe("NotAllowed (AlreadyExists): podgroup a exists; use PATCH");
    expect(conflict).toMatchObject({ status: 409, reason: "AlreadyExists" });

    answer = () => ({ status: 400, body: '{"code":"BadRequest","message":"invalid PodSpec","details":[{"path":"containers","message":"a pod needs at least one container"}]}' });
    const bad = (await client.updatePodSpec("a", {} as never).catch((e: unknown) => e)) as ApiError;
    expect(bad.describe()).toBe("BadRequest: invalid PodSpec\n  containers: a pod needs at least one container");

    answer = () => ({ status: 502, body: "upstream down" });
    const proxy = (await client.getPodGroup("a").catch((e: unknown) => e)) as ApiError;
    expect(proxy.describe()).toBe("HTTP 502: upstream down");
  });

  it("gives up on a server that does not answer within the request timeout", async () => {
    answer = () => "hang";
    const client = new OrchestratorClient({ server: base, requestTimeoutMs: 200 });
    const started = Date.now();
    const err = await client.getPodGroup("a").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerUnreachableError);
    expect((err as Error).message).toBe(`cannot reach the orchestrator at ${base}: no answer within 200 ms`);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("says why a server cannot be reached", async () => {
    // A port that was just free: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const closed = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise((resolve) => probe.close(resolve));
    const err = await new OrchestratorClient({ server: closed }).getPodGroup("a").catch((e: unknown) => e);
    expect((err as Error).message).toBe(`cannot reach the orchestrator at ${closed}: ECONNREFUSED`);
  });

  it("lists groups sorted by name", async () => {
    answer = () => ({ status: 200, body: JSON.stringify([{ spec: { name: "b" } }, { spec: { name: "a" } }]) });
    const groups = await new OrchestratorClient({ server: base }).listPodGroups();
    expect(groups.map((g) => g.spec.name)).toEqual(["a", "b"]);
  });
});
