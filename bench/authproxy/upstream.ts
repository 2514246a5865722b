// The application behind every leg of bench:authproxy, as its own process (`node --import tsx
// bench/authproxy/upstream.ts`): node:http on 127.0.0.1, keep-alive, and every request answered
// 200 with the same 1 KiB body. Nothing is recorded (test/helpers/echo-upstream.ts keeps every
// request, which would grow and cost per request); the one thing it passes back is the
// REMOTE-USER it received, as `x-bench-remote-user`, so the bench can check once that a request
// came through authenticated. `GET /_bench/connections` answers how many connections it has
// accepted so far (so the bench can tell which legs reach it over kept-alive connections). Prints
// `listening <port>` on stdout when it accepts connections; SIGTERM stops it.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";

/** 1,024 bytes: printable, and the same every run (the bench compares the bytes it gets). */
export const upstreamBody = Buffer.alloc(1024, "capstan-bench-1k|");
export const remoteUserEcho = "x-bench-remote-user";
export const connectionsPath = "/_bench/connections";

function main(): void {
  let connections = 0;
  const server = createServer((req, res) => {
    if (req.url === connectionsPath) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`${connections}\n`);
      return;
    }
    const user = req.headers["remote-user"];
    // Drain a request body if there is one (the bench sends none), so the connection stays usable.
    req.resume();
    const headers: Record<string, string | number> = { "content-type": "text/plain", "content-length": upstreamBody.length };
    if (typeof user === "string") headers[remoteUserEcho] = user;
    res.writeHead(200, headers);
    res.end(upstreamBody);
  });
  server.on("connection", () => connections++);
  // Keep-alive for as long as a leg runs: neither nginx nor the proxy should have to reconnect.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  server.requestTimeout = 0;
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
