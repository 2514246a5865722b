// Parallel blob pushes for the registry bench: each blob is POST /v2/<name>/blobs/uploads/ (202 and
// a Location) then PUT <Location>?digest=<d> with the whole blob as body (201), the monolithic form
// both registries take (distribution 2.8 ignores POST ?digest= and answers a session, so the
// one-request form is not comparable). Through node:http with keep-alive, one connection per
// blob in flight: the load generator costs little CPU (bench/lib/http.ts says why not fetch).
import { createHash, randomFillSync } from "node:crypto";
import { createReadStream } from "node:fs";
import { Agent, request } from "node:http";

export interface Blob {
  data: Buffer;
  digest: string;
}

/** `count` blobs of `bytes` random bytes each, with their digests. */
export function randomBlobs(count: number, bytes: number): Blob[] {
  return Array.from({ length: count }, () => {
    const data = randomFillSync(Buffer.allocUnsafe(bytes));
    return { data, digest: `sha256:${createHash("sha256").update(data).digest("hex")}` };
  });
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export class BlobPusher {
  private readonly agent: Agent;

  constructor(
    private readonly base: string,
    maxSockets: number,
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets });
  }

  /** Push every blob at once into `repo`; elapsed seconds. */
  async pushAll(repo: string, blobs: Blob[]): Promise<number> {
    const started = performance.now();
    await Promise.all(blobs.map((b) => this.push(repo, b)));
    return (performance.now() - started) / 1000;
  }

  async push(repo: string, blob: Blob): Promise<void> {
    const start = await this.call(`${this.base}/v2/${repo}/blobs/uploads/`, "POST", { "content-length": "0" });
    const location = start.headers.location;
    if (start.status !== 202 || typeof location !== "string") throw new Error(`POST uploads of ${repo}: ${start.status} ${start.text.slice(0, 300)}`);
    const url = new URL(location, this.base);
    url.searchParams.set("digest", blob.digest);
    const done = await this.call(url.href, "PUT", { "content-type": "application/octet-stream", "content-length": String(blob.data.length) }, blob.data);
    if (done.status !== 201 || done.headers["docker-content-digest"] !== blob.digest) {
      throw new Error(`PUT ${url.pathname}: ${done.status} ${String(done.headers["docker-content-digest"])} ${done.text.slice(0, 300)}`);
    }
  }

  /** Push the file `path` (`size` bytes, digest `digest`) as one blob, streamed from the file in 1 MiB reads. */
  async pushFile(repo: string, path: string, size: number, digest: string): Promise<void> {
    const start = await this.call(`${this.base}/v2/${repo}/blobs/uploads/`, "POST", { "content-length": "0" });
    const location = start.headers.location;
    if (start.status !== 202 || typeof location !== "string") throw new Error(`POST uploads of ${repo}: ${start.status} ${start.text.slice(0, 300)}`);
    const url = new URL(location, this.base);
    url.searchParams.set("digest", digest);
    const done = await this.call(url.href, "PUT", { "content-type": "application/octet-stream", "content-length": String(size) }, path);
    if (done.status !== 201) throw new Error(`PUT ${url.pathname} of ${path}: ${done.status} ${done.text.slice(0, 300)}`);
  }

  /** GET a blob, its bytes counted and dropped: how many there were. */
  download(repo: string, digest: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(`${this.base}/v2/${repo}/blobs/${digest}`, { agent: this.agent, timeout: 60_000 }, (res) => {
        let n = 0;
        res.on("data", (c: Buffer) => (n += c.length));
        res.on("error", reject);
        res.on("end", () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`GET blob ${digest}: ${res.statusCode}`))));
      });
      req.on("timeout", () => req.destroy(new Error(`GET blob ${digest}: no answer in 60 s`)));
      req.on("error", reject);
      req.end();
    });
  }

  /** HEAD a blob: its size, or undefined when the registry does not serve it. */
  async size(repo: string, digest: string): Promise<number | undefined> {
    const res = await this.call(`${this.base}/v2/${repo}/blobs/${digest}`, "HEAD", {});
    return res.status === 200 ? Number(res.headers["content-length"]) : undefined;
  }

  close(): void {
    this.agent.destroy();
  }

  /** One request; `body` a Buffer, or a file path streamed in. */
  private call(url: string, method: string, headers: Record<string, string>, body?: Buffer | string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(url, { method, agent: this.agent, headers, timeout: 60_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
      });
      req.on("timeout", () => req.destroy(new Error(`${method} ${url}: no answer in 60 s`)));
      req.on("error", reject);
      if (typeof body === "string") {
        const file = createReadStream(body, { highWaterMark: 1 << 20 });
        file.on("error", (err) => req.destroy(err));
        file.pipe(req);
      } else req.end(body);
    });
  }
}
