// The load generators' HTTP client: node:http with keep-alive. The load generator shares the
// machine's cores with the server under test and etcd, and undici's fetch costs it several times
// the CPU per request (measured: about 0.6-1.4 ms against 0.2 ms), which would be taken from them.
import { Agent, request } from "node:http";

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

export interface HttpAnswer {
  status: number;
  text: string;
}

export interface HttpCallOptions {
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs?: number;
}

/** One request with a timeout; the answer's body as text. */
export function httpCall(url: string, method: string, options: HttpCallOptions = {}): Promise<HttpAnswer> {
  const { body, timeoutMs = 10_000 } = options;
  const headers = body === undefined ? (options.headers ?? {}) : { ...options.headers, "content-length": String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${url}: no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** Closes the kept-alive connections (at the end of a run, so the process can exit). */
export function closeConnections(): void {
  agent.destroy();
}
