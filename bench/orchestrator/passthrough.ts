// A floor of bench:orchestrator's (c): the least an HTTP API on etcd written in Node does, as its
// own process (`node --import tsx bench/orchestrator/passthrough.ts <etcd host:port> <key prefix>`).
// POST /api/podgroups: the JSON body's `name` is created under the prefix with one create-if-absent
// txn (202, or 409 when it exists), with the etcd3 client the bare etcd leg uses; GET
// /api/podgroups?name=N answers from memory what this process created (200 with the JSON, or 404),
// as the orchestrator answers GETs from its informer caches, so a GET costs no etcd call. No
// authentication, no validation, no controller, no watch: less work per request than any real API
// on etcd does. What `capstan orchestrator` costs beyond this is its own; what this costs over bare
// etcd is one more process with an HTTP server and the etcd client, which any API on etcd in Node
// pays. Prints `listening <port>` on stdout; SIGTERM stops it.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Etcd3 } from "etcd3";

const [endpoint, prefix] = process.argv.slice(2);
if (!endpoint || !prefix) throw new Error("usage: passthrough.ts <etcd host:port> <key prefix>");
const client = new Etcd3({ hosts: `http://${endpoint}` });
/** What this process created, by name: the reads' cache. */
const created = new Map<string, string>();

function answer(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (url.pathname !== "/api/podgroups") return answer(res, 404, '{"message":"not found"}');
  if (req.method === "POST") {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const name = (JSON.parse(body) as { name: string }).name;
    const key = `${prefix}${name}`;
    const r = await client.if(key, "Create", "==", 0).then(client.put(key).value(body)).commit();
    if (r.succeeded) created.set(name, body);
    return r.succeeded ? answer(res, 202, `{"message":"podgroup ${name} accepted"}`) : answer(res, 409, `{"message":"podgroup ${name} exists"}`);
  }
  const name = url.searchParams.get("name") ?? "";
  const value = created.get(name);
  return value === undefined ? answer(res, 404, `{"message":"podgroup ${name} not found"}`) : answer(res, 200, value);
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((error: unknown) => answer(res, 500, JSON.stringify({ message: String(error) })));
});
server.keepAliveTimeout = 65_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
process.once("SIGTERM", () => {
  server.close(() => {
    client.close();
    process.exit(0);
  });
  server.closeAllConnections();
});
