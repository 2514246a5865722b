// Two registry instances on one S3 root (the documented multi-instance setup, each with its own
// S3Driver, against the services' s3rver): a pusher must never get bytes Y stored under digest(X),
// whichever instance each request of an upload lands on and however they interleave
// (docs/registry.md, "Uploads"). The interleavings are forced by wrapping the drivers: a PATCH whose
// body is held back until another request has finished, a move of the upload's bytes preceded by
// another instance's commit to the same key.
import { createHash } from "node:crypto";
import { request } from "node:http";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { S3Driver } from "../../../adapters/blobstore/s3.ts";
import { s3DriverOptions, uniqueName } from "../../helpers/services.ts";
import { Client, digestOf, serveRegistry, type Served } from "./harness.ts";

const MiB = 1024 * 1024;

function s3Driver(rootDirectory: string): S3Driver {
  return new S3Driver(s3DriverOptions(rootDirectory, { chunkSize: 5 * MiB }));
}

/** A request whose body is sent only when `send` is called; resolves with the answer. */
function heldRequest(base: string, method: string, path: string): { send(body: Buffer): void; done: Promise<{ status: number; text: string }> } {
  const u = new URL(path, base);
  let req!: ReturnType<typeof request>;
  const done = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req = request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: { "content-type": "application/octet-stream", "transfer-encoding": "chunked" } },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.flushHeaders();
  });
  return { send: (body) => req.end(body), done };
}

const sha = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

describe("two registry instances on one S3 root", () => {
  let root: string;
  let dA: S3Driver;
  let dB: S3Driver;
  let A: Served;
  let B: Served;
  let a: Client;
  let b: Client;

  beforeEach(async () => {
    root = `/${uniqueName("registry-instances")}`;
    dA = s3Driver(root);
    dB = s3Driver(root);
    A = await serveRegistry(dA);
    B = await serveRegistry(dB);
    a = new Client(A.base);
    b = new Client(B.base);
  });

  afterEach(async () => {
    await A?.close();
    await B?.close();
    await dA?.delete("/").catch(() => {});
    await dA?.close();
    await dB?.close();
  });

  /** Resolves once instance B has opened the upload's writer (the next call of dB.writer). */
  function nextWriterOnB(): Promise<void> {
    const original = dB.writer.bind(dB);
    return new Promise((resolve) => {
      dB.writer = async (path: string, append: boolean) => {
        const w = await original(path, append);
        dB.writer = original;
        resolve();
        return w;
      };
    });
  }

  /** The blob `digest` as `client` serves it from `repo`: its bytes, or undefined when it is not there. */
  async function served(client: Client, repo: string, digest: string): Promise<Buffer | undefined> {
    const got = await client.req("GET", `/v2/${repo}/blobs/${digest}`);
    return got.status === 200 ? got.body : undefined;
  }

  it("PATCHes of one upload on both instances at once: one is refused (416), the other's bytes stand, and the PUT's digest holds its bytes", async () => {
    const X = Buffer.alloc(6 * MiB, "X");
    const Y = Buffer.alloc(6 * MiB, "Y");
    const loc = (await a.req("POST", "/v2/evil/app/blobs/uploads/")).headers.get("location")!;
    // B opens the upload (at size 0) and waits for its body; A's PATCH comes and goes meanwhile.
    const opened = nextWriterOnB();
    const patchB = heldRequest(B.base, "PATCH", loc);
    await opened;
    const patchA = await a.req("PATCH", loc, { body: X, headers: { "content-type": "application/octet-stream" } });
    expect(patchA.status, patchA.text).toBe(202);
    patchB.send(Y);
    const answerB = await patchB.done;
    expect(answerB.status, answerB.text).toBe(416);
    expect(JSON.parse(answerB.text).errors[0].code).toBe("RANGE_INVALID");
    expect((await b.req("GET", loc)).headers.get("range")).toBe(`0-${X.length - 1}`);

    const put = await a.req("PUT", `${loc}?digest=${sha(X)}`);
    expect(put.status, put.text).toBe(201);
    expect((await served(b, "evil/app", sha(X)))?.equals(X)).toBe(true);
    // Someone else pushing the genuine X gets X.
    await b.pushBlob("victim/app", X);
    expect((await served(b, "victim/app", sha(X)))?.equals(X)).toBe(true);
  });

  for (const trusted of [true, false]) {
    it(`another instance commits the same upload between this one's commit and its move (${trusted ? "running hash" : "re-hashed"}): no other bytes under the digest`, async () => {
      const X = Buffer.alloc(3000, "X");
      const Y = Buffer.alloc(3000, "Y");
      const loc = (await a.req("POST", "/v2/evil/app/blobs/uploads/")).headers.get("location")!;
      const id = loc.slice(loc.lastIndexOf("/") + 1);
      const data = `/docker/registry/v2/repositories/evil/app/_uploads/${id}/data`;
      // Untrusted: the bytes arrive through B, so A's PUT has no running hash for them.
      expect((await (trusted ? a : b).req("PATCH", loc, { body: X })).status).toBe(202);
      // Right before A moves the upload's bytes, B's driver commits Y to the same key (what B's PUT
      // of the same upload would do, had it passed its checks at the same moment).
      const move = dA.move.bind(dA);
      let swapped = false;
      dA.move = async (source: string, dest: string) => {
        if (source === data && !swapped) {
          swapped = true;
          const w = await dB.writer(data, false);
          await w.write(Y);
          await w.commit();
        }
        return move(source, dest);
      };
      const put = await a.req("PUT", `${loc}?digest=${sha(X)}`);
      expect(swapped).toBe(true);
      expect(put.status, put.text).toBe(400);
      expect(JSON.parse(put.text).errors[0].code).toBe("DIGEST_INVALID");
      expect(await served(a, "evil/app", sha(X))).toBeUndefined();
      expect(await dA.stat(`/docker/registry/v2/blobs/sha256/${sha(X).slice(7, 9)}/${sha(X).slice(7)}/data`).catch(() => undefined)).toBeUndefined();
      // The genuine push afterwards.
      dA.move = move;
      await a.pushBlob("evil/app", X);
      expect((await served(b, "evil/app", sha(X)))?.equals(X)).toBe(true);
    });
  }

  it("a closing PUT on one instance while a PUT of the same upload is under way on the other: the loser fails, the digest holds its bytes", async () => {
    const X = Buffer.alloc(2000, "X");
    const Y = Buffer.alloc(2000, "Y");
    const loc = (await a.req("POST", "/v2/evil/app/blobs/uploads/")).headers.get("location")!;
    const opened = nextWriterOnB();
    const putB = heldRequest(B.base, "PUT", `${loc}?digest=${sha(Y)}`);
    await opened;
    const putA = await a.req("PUT", `${loc}?digest=${sha(X)}`, { body: X });
    expect(putA.status, putA.text).toBe(201);
    putB.send(Y);
    const answerB = await putB.done;
    expect(answerB.status, answerB.text).toBeGreaterThanOrEqual(400);
    expect((await served(a, "evil/app", sha(X)))?.equals(X)).toBe(true);
    expect(await served(a, "evil/app", sha(Y))).toBeUndefined();
    expect(digestOf(X)).toBe(sha(X));
  });
});
