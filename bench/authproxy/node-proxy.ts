// The floor of bench:authproxy's (c): the least a reverse proxy on node:http does, as its own
// process (`node --import tsx bench/authproxy/node-proxy.ts <upstream port>`): each request's
// headers copied (without Connection and Keep-Alive), sent over a keep-alive http.Agent to the
// upstream, and the answer's status, headers and body piped back. No login, no location matching,
// no header rewriting, no timeouts. What `capstan authproxy` costs beyond this is its own; what
// this costs is Node's HTTP server, client and sockets, which any proxy written on them pays. Prints
// `listening <port>` on stdout; SIGTERM stops it (and lets --cpu-prof write its profile).
import http from "node:http";
import type { AddressInfo } from "node:net";

const upstreamPort = Number(process.argv[2]);
if (!Number.isInteger(upstreamPort) || upstreamPort <= 0) throw new Error("usage: node-proxy.ts <upstream port>");
const agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 256, scheduling: "lifo" });

const server = http.createServer((req, res) => {
  const headers = { ...req.headers };
  delete headers.connection;
  delete headers["keep-alive"];
  const up = http.request({ host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers, agent }, (ures) => {
    res.writeHead(ures.statusCode ?? 502, ures.headers);
    ures.pipe(res);
  });
  up.on("error", () => {
    if (!res.headersSent) res.writeHead(502, { "content-length": 0 });
    res.end();
  });
  req.pipe(up);
});
server.keepAliveTimeout = 65_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
process.once("SIGTERM", () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
