// The registry bench's floor: a "registry" that does no work, in this process, on a 127.0.0.1 free
// port. It speaks just enough of the API for skopeo's push and pull: uploads are read and thrown
// away (no hashing, nothing written; a blob of up to 4 MiB, the config, is kept in memory), and the
// layer is served back from the image layout's own file (already in the page cache). Timing skopeo
// against it gives what the client, loopback and the disk of the pulled copy cost by themselves: no
// real registry can be faster, so distribution's time over the sink's is the best ratio any
// registry could reach against distribution with this client.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { BenchImage } from "./image.ts";

const keepLimit = 4 * 1024 * 1024;

export interface Sink {
  base: string;
  host: string;
  stop(): Promise<void>;
}

interface Received {
  size: number;
  /** The bytes, when at most keepLimit. */
  kept: Buffer[] | undefined;
}

async function drain(req: IncomingMessage, into: Received): Promise<void> {
  for await (const chunk of req as AsyncIterable<Buffer>) {
    into.size += chunk.length;
    if (into.kept && into.size <= keepLimit) into.kept.push(chunk);
    else into.kept = undefined;
  }
}

export async function startSink(image: BenchImage): Promise<Sink> {
  const layerFile = join(image.dir, "blobs", "sha256", image.layerDigest.slice("sha256:".length));
  const uploads = new Map<string, Received>();
  const blobs = new Map<string, { size: number; bytes: Buffer | undefined }>();
  const manifests = new Map<string, { type: string; body: Buffer; digest: string }>();
  let nextUpload = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://sink");
    const path = url.pathname;
    const method = req.method ?? "GET";
    res.setHeader("docker-distribution-api-version", "registry/2.0");
    const end = (status: number, headers: Record<string, string> = {}, body?: Buffer | string) => {
      res.writeHead(status, { "content-length": String(body === undefined ? 0 : Buffer.byteLength(body)), ...headers });
      res.end(body);
    };
    if (path === "/v2/") {
      await drain(req, { size: 0, kept: undefined });
      return end(200, { "content-type": "application/json" }, "{}");
    }
    let m = /^\/v2\/(.+)\/blobs\/uploads\/([^/]*)$/.exec(path);
    if (m) {
      const [, name, id] = m;
      if (method === "POST") {
        await drain(req, { size: 0, kept: undefined });
        const newId = String(++nextUpload);
        uploads.set(newId, { size: 0, kept: [] });
        return end(202, { location: `/v2/${name}/blobs/uploads/${newId}`, range: "0-0", "docker-upload-uuid": newId });
      }
      const upload = uploads.get(id!);
      if (!upload) return end(404);
      await drain(req, upload);
      if (method === "PATCH") return end(202, { location: path, range: `0-${Math.max(0, upload.size - 1)}`, "docker-upload-uuid": id! });
      if (method === "PUT") {
        const digest = url.searchParams.get("digest") ?? "";
        uploads.delete(id!);
        blobs.set(digest, { size: upload.size, bytes: upload.kept ? Buffer.concat(upload.kept) : undefined });
        return end(201, { location: `/v2/${name}/blobs/${digest}`, "docker-content-digest": digest });
      }
      return end(405);
    }
    m = /^\/v2\/(.+)\/blobs\/([a-z0-9]+:[a-f0-9]+)$/.exec(path);
    if (m) {
      const digest = m[2]!;
      const blob = blobs.get(digest);
      if (!blob || (blob.bytes === undefined && digest !== image.layerDigest)) return end(404);
      const headers = { "content-length": String(blob.size), "content-type": "application/octet-stream", "docker-content-digest": digest };
      if (method === "HEAD") {
        res.writeHead(200, headers);
        return void res.end();
      }
      if (blob.bytes !== undefined) return end(200, headers, blob.bytes);
      res.writeHead(200, headers);
      createReadStream(layerFile, { highWaterMark: 1 << 20 }).pipe(res);
      return;
    }
    m = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(path);
    if (m) {
      const ref = m[2]!;
      if (method === "PUT") {
        const got: Received = { size: 0, kept: [] };
        await drain(req, got);
        const body = Buffer.concat(got.kept ?? []);
        const digest = `sha256:${createHash("sha256").update(body).digest("hex")}`;
        const entry = { type: req.headers["content-type"] ?? "application/vnd.oci.image.manifest.v1+json", body, digest };
        manifests.set(ref, entry);
        manifests.set(digest, entry);
        return end(201, { location: `/v2/${m[1]}/manifests/${digest}`, "docker-content-digest": digest });
      }
      const entry = manifests.get(ref);
      if (!entry) return end(404);
      const headers = { "content-type": entry.type, "docker-content-digest": entry.digest };
      if (method === "HEAD") {
        res.writeHead(200, { ...headers, "content-length": String(entry.body.length) });
        return void res.end();
      }
      return end(200, headers, entry.body);
    }
    await drain(req, { size: 0, kept: undefined });
    end(404);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
