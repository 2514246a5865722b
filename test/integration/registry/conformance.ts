// The OCI distribution-spec conformance workflows (pull, push, content discovery, content
// management, Range reads), ported from opencontainers/distribution-spec's conformance suite, plus
// what this registry promises beyond them (docs/registry.md): uploads that survive a restart,
// sha512, distribution's error codes with nothing written on bad input, the access each route asks
// for. One function per storage driver: conformance.test.ts runs it on the filesystem driver; an
// S3 driver plugs in with `registryConformance("s3", factory)`.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StorageDriver } from "../../../adapters/blobstore/driver.ts";
import {
  Client,
  digestOf,
  makeImage,
  makeIndex,
  mt,
  RecordingAuthorizer,
  serveRegistry,
  snapshot,
  type Answer,
  type DriverFactory,
  type DriverFixture,
  type ErrorsBody,
  type Served,
} from "./harness.ts";

function codes(a: Answer): string[] {
  return a.json<ErrorsBody>().errors.map((e) => e.code);
}

function expectError(a: Answer, status: number, code: string): void {
  expect(a.status, a.text).toBe(status);
  expect(a.headers.get("content-type")).toMatch(/^application\/json/);
  expect(codes(a)).toContain(code);
  expect(a.headers.get("docker-distribution-api-version")).toBe("registry/2.0");
}

/** The driver with every reader() of an upload's bytes (a re-hash) recorded. */
function recordingUploadReads(inner: StorageDriver): { driver: StorageDriver; reads: string[] } {
  const reads: string[] = [];
  const driver = new Proxy(inner, {
    get(target, prop) {
      if (prop === "reader") {
        return (path: string, offset?: number, length?: number) => {
          if (path.includes("/_uploads/")) reads.push(path);
          return target.reader(path, offset, length);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { driver, reads };
}

/** Where a blob's bytes are stored (distribution's layout). */
function blobPath(digest: string): string {
  const [alg, hex] = digest.split(":") as [string, string];
  return `/docker/registry/v2/blobs/${alg}/${hex.slice(0, 2)}/${hex}/data`;
}

export function registryConformance(driverName: string, factory: DriverFactory): void {
  describe(`registry conformance (${driverName} driver)`, () => {
    let fx: DriverFixture;
    let served: Served;
    let c: Client;
    let driver: StorageDriver;
    let n = 0;
    /** A fresh repository name per test, so tests do not see each other's content. */
    const repo = (label = "r") => `conf/${label}-${++n}`;

    beforeAll(async () => {
      fx = await factory();
      driver = fx.driver;
      served = await serveRegistry(driver);
      c = new Client(served.base);
    });

    afterAll(async () => {
      await served?.close();
      await fx?.driver.close();
      await fx?.cleanup();
    });

    describe("pull", () => {
      it("GET /v2/ answers 200 {} with the API version header", async () => {
        const a = await c.req("GET", "/v2/");
        expect(a.status).toBe(200);
        expect(a.json()).toEqual({});
        expect(a.headers.get("docker-distribution-api-version")).toBe("registry/2.0");
      });

      it("missing blobs are 404 BLOB_UNKNOWN, existing ones 200 with digest, length and ETag", async () => {
        const r = repo();
        const bytes = randomBytes(512);
        const d = digestOf(bytes);
        expectError(await c.req("GET", `/v2/${r}/blobs/${d}`), 404, "BLOB_UNKNOWN");
        expect((await c.req("HEAD", `/v2/${r}/blobs/${d}`)).status).toBe(404);
        await c.pushBlob(r, bytes);
        const head = await c.req("HEAD", `/v2/${r}/blobs/${d}`);
        expect(head.status).toBe(200);
        expect(head.headers.get("content-length")).toBe("512");
        expect(head.headers.get("docker-content-digest")).toBe(d);
        expect(head.body.length).toBe(0);
        const get = await c.req("GET", `/v2/${r}/blobs/${d}`);
        expect(get.status).toBe(200);
        expect(get.body.equals(bytes)).toBe(true);
        expect(get.headers.get("etag")).toBe(`"${d}"`);
        expect(get.headers.get("content-type")).toBe("application/octet-stream");
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`, { headers: { "if-none-match": `"${d}"` } })).status).toBe(304);
        // Another repository does not serve it until it links it.
        expectError(await c.req("GET", `/v2/${repo()}/blobs/${d}`), 404, "BLOB_UNKNOWN");
      });

      it("manifests by tag and by digest (two images), HEAD and GET, missing ones 404 MANIFEST_UNKNOWN", async () => {
        const r = repo();
        const one = makeImage();
        const two = makeImage({ docker: true, layers: 1 });
        await c.pushImage(r, "one", one);
        await c.pushImage(r, "two", two);
        const accept = { accept: `${mt.ociManifest}, ${mt.ociIndex}, ${mt.dockerManifest}, ${mt.dockerList}` };
        for (const [img, tag] of [[one, "one"], [two, "two"]] as const) {
          for (const ref of [tag, img.digest]) {
            const get = await c.req("GET", `/v2/${r}/manifests/${ref}`, { headers: accept });
            expect(get.status, get.text).toBe(200);
            expect(get.text).toBe(img.manifest);
            expect(get.headers.get("content-type")).toBe(img.mediaType);
            expect(get.headers.get("docker-content-digest")).toBe(img.digest);
            expect(get.headers.get("content-length")).toBe(String(Buffer.byteLength(img.manifest)));
            const head = await c.req("HEAD", `/v2/${r}/manifests/${ref}`, { headers: accept });
            expect(head.status).toBe(200);
            expect(head.headers.get("docker-content-digest")).toBe(img.digest);
            expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(img.manifest)));
            expect((await c.req("GET", `/v2/${r}/manifests/${ref}`, { headers: { ...accept, "if-none-match": `"${img.digest}"` } })).status).toBe(304);
          }
        }
        expectError(await c.req("GET", `/v2/${r}/manifests/missing-tag`, { headers: accept }), 404, "MANIFEST_UNKNOWN");
        expectError(await c.req("GET", `/v2/${r}/manifests/${digestOf(randomBytes(16))}`, { headers: accept }), 404, "MANIFEST_UNKNOWN");
        expect((await c.req("HEAD", `/v2/${r}/manifests/missing-tag`, { headers: accept })).status).toBe(404);
        // "sha256:baddigeststring": the conformance suite accepts 400 or 404; ours is 400 DIGEST_INVALID.
        expectError(await c.req("GET", `/v2/${r}/manifests/sha256:baddigeststring`, { headers: accept }), 400, "DIGEST_INVALID");
      });

      it("If-None-Match on a manifest is 304 only where the repository has it", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        await c.pushImage(r, "t", img);
        const headers = { accept: mt.ociManifest, "if-none-match": `"${img.digest}"` };
        expect((await c.req("GET", `/v2/${r}/manifests/${img.digest}`, { headers })).status).toBe(304);
        // Another repository does not have it: the ETag names content, not a right to it.
        const other = repo();
        await c.pushImage(other, "t", makeImage({ layers: 1 }));
        expectError(await c.req("GET", `/v2/${other}/manifests/${img.digest}`, { headers }), 404, "MANIFEST_UNKNOWN");
        expect((await c.req("HEAD", `/v2/${other}/manifests/${img.digest}`, { headers })).status).toBe(404);
        expectError(await c.req("GET", `/v2/${repo("none")}/manifests/${img.digest}`, { headers }), 404, "MANIFEST_UNKNOWN");
        // Deleted: no 304 any more.
        expect((await c.req("DELETE", `/v2/${r}/manifests/${img.digest}`)).status).toBe(202);
        expectError(await c.req("GET", `/v2/${r}/manifests/${img.digest}`, { headers }), 404, "MANIFEST_UNKNOWN");
      });

      it("serves OCI types only to clients that accept them (or */*); Docker types always", async () => {
        const r = repo();
        const oci = makeImage();
        const docker = makeImage({ docker: true });
        await c.pushImage(r, "oci", oci);
        await c.pushImage(r, "docker", docker);
        expectError(await c.req("GET", `/v2/${r}/manifests/oci`, { headers: { accept: mt.dockerManifest } }), 404, "MANIFEST_UNKNOWN");
        // No Accept header at all (fetch would send */*).
        expect((await c.raw("GET", `/v2/${r}/manifests/oci`)).status).toBe(404);
        expect((await c.req("GET", `/v2/${r}/manifests/oci`, { headers: { accept: "*/*" } })).status).toBe(200);
        expect((await c.req("GET", `/v2/${r}/manifests/oci`, { headers: { accept: `${mt.ociManifest};q=0.5` } })).status).toBe(200);
        const d = await c.req("GET", `/v2/${r}/manifests/docker`);
        expect(d.status).toBe(200);
        expect(d.headers.get("content-type")).toBe(mt.dockerManifest);
      });

      it("a Docker manifest list asked for by tag by a client accepting only schema 2 gets the linux/amd64 image", async () => {
        const r = repo();
        const amd = makeImage({ docker: true, layers: 1 });
        const arm = makeImage({ docker: true, layers: 1 });
        await c.pushImage(r, "amd", amd);
        await c.pushImage(r, "arm", arm);
        const list = makeIndex([amd, arm], { docker: true });
        expect((await c.pushManifest(r, "multi", list.manifest, list.mediaType)).status).toBe(201);
        const old = await c.req("GET", `/v2/${r}/manifests/multi`, { headers: { accept: mt.dockerManifest } });
        expect(old.status).toBe(200);
        expect(old.headers.get("docker-content-digest")).toBe(amd.digest);
        const modern = await c.req("GET", `/v2/${r}/manifests/multi`, { headers: { accept: `${mt.dockerManifest}, ${mt.dockerList}` } });
        expect(modern.headers.get("docker-content-digest")).toBe(list.digest);
      });
    });

    describe("push", () => {
      it("monolithic POST ?digest= answers 201 with a pullable Location", async () => {
        const r = repo();
        const bytes = randomBytes(700);
        const d = digestOf(bytes);
        const a = await c.req("POST", `/v2/${r}/blobs/uploads/?digest=${d}`, { body: bytes, headers: { "content-type": "application/octet-stream" } });
        expect(a.status).toBe(201);
        expect(a.headers.get("docker-content-digest")).toBe(d);
        const got = await c.req("GET", c.url(a.headers.get("location")));
        expect(got.body.equals(bytes)).toBe(true);
      });

      it("POST then PUT with the whole body", async () => {
        const r = repo();
        const bytes = randomBytes(900);
        const d = digestOf(bytes);
        const post = await c.req("POST", `/v2/${r}/blobs/uploads/`, { headers: { "content-length": "0" } });
        expect(post.status).toBe(202);
        expect(post.headers.get("location")).toMatch(new RegExp(`^/v2/${r}/blobs/uploads/[0-9a-f-]{36}$`));
        expect(post.headers.get("docker-upload-uuid")).toMatch(/^[0-9a-f-]{36}$/);
        expect(post.headers.get("range")).toBe("0-0");
        const put = await c.req("PUT", `${c.url(post.headers.get("location"))}?digest=${d}`, { body: bytes, headers: { "content-type": "application/octet-stream" } });
        expect(put.status, put.text).toBe(201);
        expect(put.headers.get("location")).toBe(`/v2/${r}/blobs/${d}`);
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`)).body.equals(bytes)).toBe(true);
      });

      it("streamed: one PATCH with the whole blob, then PUT without a body", async () => {
        const r = repo();
        const bytes = randomBytes(2000);
        const d = digestOf(bytes);
        const post = await c.req("POST", `/v2/${r}/blobs/uploads/`);
        const patch = await c.req("PATCH", c.url(post.headers.get("location")), { body: bytes, headers: { "content-type": "application/octet-stream" } });
        expect(patch.status).toBe(202);
        expect(patch.headers.get("range")).toBe("0-1999");
        const put = await c.req("PUT", `${c.url(patch.headers.get("location"))}?digest=${d}`, { headers: { "content-length": "0" } });
        expect(put.status, put.text).toBe(201);
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`)).body.equals(bytes)).toBe(true);
      });

      it("chunked with Content-Range: out of order is 416 with the upload's Range, a retried chunk is 416, GET tells where to go on", async () => {
        const r = repo();
        const bytes = randomBytes(3 * 1024 - 5);
        const d = digestOf(bytes);
        const size = 1024;
        let loc = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/`, { headers: { "content-length": "0" } })).headers.get("location"));
        const patch = (start: number, end: number) =>
          c.req("PATCH", loc, { body: bytes.subarray(start, end + 1), headers: { "content-type": "application/octet-stream", "content-range": `${start}-${end}` } });
        // Out of order first: skipping ahead.
        const skip = await patch(size, 2 * size - 1);
        expectError(skip, 416, "RANGE_INVALID");
        expect(skip.headers.get("range")).toBe("0-0");
        const first = await patch(0, size - 1);
        expect(first.status).toBe(202);
        expect(first.headers.get("range")).toBe(`0-${size - 1}`);
        loc = c.url(first.headers.get("location"));
        // The same chunk again.
        expectError(await patch(0, size - 1), 416, "RANGE_INVALID");
        const status = await c.req("GET", loc);
        expect(status.status).toBe(204);
        expect(status.headers.get("range")).toBe(`0-${size - 1}`);
        expect(status.headers.get("location")).toBeTruthy();
        expect((await patch(size, 2 * size - 1)).status).toBe(202);
        // The last chunk in the closing PUT, with its Content-Range; out of order first.
        const badPut = await c.req("PUT", `${loc}?digest=${d}`, { body: bytes.subarray(0, 10), headers: { "content-range": "0-9", "content-type": "application/octet-stream" } });
        expectError(badPut, 416, "RANGE_INVALID");
        const put = await c.req("PUT", `${loc}?digest=${d}`, {
          body: bytes.subarray(2 * size),
          headers: { "content-range": `${2 * size}-${bytes.length - 1}`, "content-type": "application/octet-stream" },
        });
        expect(put.status, put.text).toBe(201);
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`)).body.equals(bytes)).toBe(true);
      });

      it("a Content-Range whose length differs from Content-Length is 400 SIZE_INVALID, a malformed one 416, and nothing is appended", async () => {
        const r = repo();
        const loc = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
        expectError(await c.req("PATCH", loc, { body: randomBytes(10), headers: { "content-range": "0-19" } }), 400, "SIZE_INVALID");
        expectError(await c.req("PATCH", loc, { body: randomBytes(10), headers: { "content-range": "nine-ten" } }), 416, "RANGE_INVALID");
        expectError(await c.req("PATCH", loc, { body: randomBytes(10), headers: { "content-range": "9-0" } }), 416, "RANGE_INVALID");
        expect((await c.req("GET", loc)).headers.get("range")).toBe("0-0");
      });

      for (const method of ["post only", "post+put", "chunked", "chunked and put chunk", "stream"] as const) {
        it(`a wrong digest (${method}) is 400 DIGEST_INVALID and nothing is kept`, async () => {
          const r = repo();
          const bytes = randomBytes(3000);
          const d = digestOf(Buffer.concat([bytes, Buffer.from("oh no")]));
          const before = await snapshot(driver);
          let loc = "";
          let last: Answer;
          if (method === "post only") {
            last = await c.req("POST", `/v2/${r}/blobs/uploads/?digest=${d}`, { body: bytes });
          } else {
            const post = await c.req("POST", `/v2/${r}/blobs/uploads/`);
            loc = c.url(post.headers.get("location"));
            if (method === "post+put") last = await c.req("PUT", `${loc}?digest=${d}`, { body: bytes });
            else if (method === "stream") {
              await c.req("PATCH", loc, { body: bytes });
              last = await c.req("PUT", `${loc}?digest=${d}`);
            } else {
              await c.req("PATCH", loc, { body: bytes.subarray(0, 1000), headers: { "content-range": "0-999" } });
              await c.req("PATCH", loc, { body: bytes.subarray(1000, 2000), headers: { "content-range": "1000-1999" } });
              if (method === "chunked") {
                await c.req("PATCH", loc, { body: bytes.subarray(2000), headers: { "content-range": "2000-2999" } });
                last = await c.req("PUT", `${loc}?digest=${d}`);
              } else last = await c.req("PUT", `${loc}?digest=${d}`, { body: bytes.subarray(2000), headers: { "content-range": "2000-2999" } });
            }
          }
          expectError(last, 400, "DIGEST_INVALID");
          expect((await c.req("HEAD", `/v2/${r}/blobs/${d}`)).status).toBe(404);
          if (loc !== "") expectError(await c.req("GET", loc), 404, "BLOB_UPLOAD_UNKNOWN");
          expect(await snapshot(driver)).toEqual(before);
        });
      }

      it("a push reads the upload's bytes back only when its running hash cannot be trusted (after a restart)", async () => {
        const { driver: recorded, reads } = recordingUploadReads(driver);
        const s = await serveRegistry(recorded);
        const r = repo();
        try {
          const cc = new Client(s.base);
          // Monolithic and small (one PutObject on S3), and POST + PATCHes + PUT past an S3 part.
          await cc.pushBlob(r, randomBytes(3000));
          const big = randomBytes(11 * 1024 * 1024 + 5);
          const loc = cc.url((await cc.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
          const cut = 4 * 1024 * 1024;
          expect((await cc.req("PATCH", loc, { body: big.subarray(0, cut), headers: { "content-range": `0-${cut - 1}` } })).status).toBe(202);
          expect((await cc.req("PATCH", loc, { body: big.subarray(cut, 2 * cut - 100), headers: { "content-range": `${cut}-${2 * cut - 101}` } })).status).toBe(202);
          const put = await cc.req("PUT", `${loc}?digest=${digestOf(big)}`, { body: big.subarray(2 * cut - 100), headers: { "content-range": `${2 * cut - 100}-${big.length - 1}` } });
          expect(put.status, put.text).toBe(201);
          expect((await cc.req("GET", `/v2/${r}/blobs/${digestOf(big)}`)).body.equals(big)).toBe(true);
          expect(reads).toEqual([]);
        } finally {
          await s.close();
        }
        // A PATCH through one registry, the PUT through another (a restart): the bytes are hashed
        // once, from a copy of the upload's own, never from `data` that another instance may replace.
        const first = await serveRegistry(recorded);
        const bytes = randomBytes(5000);
        const path = (await new Client(first.base).req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location")!;
        expect((await new Client(first.base).req("PATCH", path, { body: bytes })).status).toBe(202);
        await first.close();
        const second = await serveRegistry(recorded);
        try {
          const c2 = new Client(second.base);
          expect((await c2.req("PUT", `${path}?digest=${digestOf(bytes)}`)).status).toBe(201);
          expect(reads).toHaveLength(1);
          expect(reads[0]).toMatch(/\/_uploads\/[0-9a-f-]{36}\/verify-[0-9a-f-]{36}$/);
          expect((await c2.req("GET", `/v2/${r}/blobs/${digestOf(bytes)}`)).body.equals(bytes)).toBe(true);
        } finally {
          await second.close();
        }
      });

      it("a blob stored with other bytes than its digest's is replaced by a verified push", async () => {
        const r = repo();
        const right = randomBytes(2500);
        const d = digestOf(right);
        await driver.putContent(blobPath(d), randomBytes(2500));
        expect(await c.pushBlob(r, right)).toBe(d);
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`)).body.equals(right)).toBe(true);
        // Chunked, after a restart (the re-hashed path) too.
        const other = randomBytes(4000);
        const od = digestOf(other);
        await driver.putContent(blobPath(od), Buffer.alloc(4000, "y"));
        const first = await serveRegistry(driver);
        const path = (await new Client(first.base).req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location")!;
        await new Client(first.base).req("PATCH", path, { body: other });
        await first.close();
        expect((await c.req("PUT", `${path}?digest=${od}`)).status).toBe(201);
        expect((await c.req("GET", `/v2/${r}/blobs/${od}`)).body.equals(other)).toBe(true);
      });

      it("a manifest whose body has the other shape than its declared type (and no mediaType) is 400 MANIFEST_INVALID", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        for (const b of img.blobs) await c.pushBlob(r, b);
        const m = JSON.parse(img.manifest) as Record<string, unknown>;
        delete m.mediaType;
        const before = await snapshot(driver);
        // Declared an image manifest, shaped as an index: it would be served as an index.
        const indexShaped = JSON.stringify({ ...m, manifests: [] });
        expectError(await c.pushManifest(r, "weird", indexShaped, mt.ociManifest), 400, "MANIFEST_INVALID");
        expectError(await c.pushManifest(r, digestOf(indexShaped), indexShaped, mt.ociManifest), 400, "MANIFEST_INVALID");
        // Declared an index, shaped as an image manifest.
        expectError(await c.pushManifest(r, "weird", JSON.stringify(m), mt.ociIndex), 400, "MANIFEST_INVALID");
        expect(await snapshot(driver)).toEqual(before);
        // With the mediaType field the body says what it is, and is served as that.
        const typed = JSON.stringify({ ...m, mediaType: mt.ociManifest, manifests: [] });
        expect((await c.pushManifest(r, "typed", typed, mt.ociManifest)).status).toBe(201);
        const got = await c.req("GET", `/v2/${r}/manifests/typed`, { headers: { accept: `${mt.ociManifest}, ${mt.ociIndex}` } });
        expect(got.headers.get("content-type")).toBe(mt.ociManifest);
      });

      it("the empty blob and the empty JSON object", async () => {
        const r = repo();
        for (const bytes of [Buffer.alloc(0), Buffer.from("{}")]) {
          const d = await c.pushBlob(r, bytes);
          const head = await c.req("HEAD", `/v2/${r}/blobs/${d}`);
          expect(head.status).toBe(200);
          expect(head.headers.get("content-length")).toBe(String(bytes.length));
          expect((await c.req("GET", `/v2/${r}/blobs/${d}`)).body.equals(bytes)).toBe(true);
          expect((await c.req("DELETE", `/v2/${r}/blobs/${d}`)).status).toBe(202);
        }
        // A session closed by a PUT without any body is the empty blob too.
        const loc = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
        expect((await c.req("PUT", `${loc}?digest=${digestOf(Buffer.alloc(0))}`)).status).toBe(201);
      });

      it("cross-repository mount: 201 when `from` has the blob; a session (202) without `from` or when it lacks the blob", async () => {
        const source = repo("src");
        const target = repo("dst");
        const bytes = randomBytes(600);
        const d = await c.pushBlob(source, bytes);
        const mount = await c.req("POST", `/v2/${target}/blobs/uploads/?mount=${d}&from=${source}`);
        expect(mount.status).toBe(201);
        expect(mount.headers.get("location")).toBe(`/v2/${target}/blobs/${d}`);
        expect(mount.headers.get("docker-content-digest")).toBe(d);
        expect((await c.req("GET", `/v2/${target}/blobs/${d}`)).body.equals(bytes)).toBe(true);

        const anonymous = await c.req("POST", `/v2/${repo()}/blobs/uploads/?mount=${d}`);
        expect(anonymous.status).toBe(202);
        expect(anonymous.headers.get("location")).toContain("/blobs/uploads/");

        const missing = await c.req("POST", `/v2/${repo()}/blobs/uploads/?mount=${digestOf(randomBytes(8))}&from=${source}`);
        expect(missing.status).toBe(202);
        const elsewhere = await c.req("POST", `/v2/${repo()}/blobs/uploads/?mount=${d}&from=${repo("empty")}`);
        expect(elsewhere.status).toBe(202);
      });

      it("cancel: DELETE of a session is 204 and the session is gone", async () => {
        const r = repo();
        const loc = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
        await c.req("PATCH", loc, { body: randomBytes(100) });
        expect((await c.req("DELETE", loc)).status).toBe(204);
        expectError(await c.req("GET", loc), 404, "BLOB_UPLOAD_UNKNOWN");
        expectError(await c.req("PATCH", loc, { body: randomBytes(10) }), 404, "BLOB_UPLOAD_UNKNOWN");
        expectError(await c.req("DELETE", loc), 404, "BLOB_UPLOAD_UNKNOWN");
        expect([...(await snapshot(driver)).keys()].some((p) => p.includes(`/repositories/${r}/_uploads/`))).toBe(false);
      });

      it("manifests: by tag, by digest with ?tag=a&tag=b, without layers, OCI index and Docker list; Location and Docker-Content-Digest", async () => {
        const r = repo();
        const img = makeImage();
        for (const b of img.blobs) await c.pushBlob(r, b);
        const byTag = await c.pushManifest(r, "latest", img.manifest, img.mediaType);
        expect(byTag.status).toBe(201);
        expect(byTag.headers.get("docker-content-digest")).toBe(img.digest);
        expect(byTag.headers.get("location")).toBe(`/v2/${r}/manifests/${img.digest}`);

        const tagged = await c.req("PUT", `/v2/${r}/manifests/${img.digest}?tag=a&tag=b&tag=1.0`, { body: img.manifest, headers: { "content-type": img.mediaType } });
        expect(tagged.status).toBe(201);
        expect(tagged.headers.get("oci-tag")).toBe("a, b, 1.0");
        for (const t of ["a", "b", "1.0", "latest"]) {
          expect((await c.req("HEAD", `/v2/${r}/manifests/${t}`, { headers: { accept: mt.ociManifest } })).headers.get("docker-content-digest")).toBe(img.digest);
        }

        const empty = makeImage({ layers: 0 });
        await c.pushBlob(r, empty.blobs[0]!);
        expect((await c.pushManifest(r, "no-layers", empty.manifest, empty.mediaType)).status).toBe(201);

        const other = makeImage({ layers: 1 });
        await c.pushImage(r, "other", other);
        const index = makeIndex([img, other]);
        const putIndex = await c.pushManifest(r, "multi", index.manifest, index.mediaType);
        expect(putIndex.status, putIndex.text).toBe(201);
        const got = await c.req("GET", `/v2/${r}/manifests/multi`, { headers: { accept: mt.ociIndex } });
        expect(got.headers.get("content-type")).toBe(mt.ociIndex);
        expect(got.text).toBe(index.manifest);

        // An OCI manifest may leave mediaType out; it is served as the type it was pushed with.
        const bare = JSON.parse(other.manifest) as Record<string, unknown>;
        delete bare.mediaType;
        const bareBytes = JSON.stringify(bare);
        expect((await c.pushManifest(r, "bare", bareBytes, mt.ociManifest)).status).toBe(201);
        expect((await c.req("GET", `/v2/${r}/manifests/bare`, { headers: { accept: mt.ociManifest } })).headers.get("content-type")).toBe(mt.ociManifest);
      });

      it("refuses manifests whose blobs or children the repository lacks (400 MANIFEST_BLOB_UNKNOWN), and writes nothing", async () => {
        const r = repo();
        const img = makeImage({ layers: 3 });
        await c.pushBlob(r, img.blobs[0]!);
        await c.pushBlob(r, img.blobs[1]!);
        // The third layer exists, but in another repository only.
        await c.pushBlob(repo(), img.blobs[3]!);
        const before = await snapshot(driver);
        const a = await c.pushManifest(r, "broken", img.manifest, img.mediaType);
        expectError(a, 400, "MANIFEST_BLOB_UNKNOWN");
        const errors = a.json<ErrorsBody>().errors;
        expect(errors.map((e) => e.detail).sort()).toEqual([digestOf(img.blobs[2]!), digestOf(img.blobs[3]!)].sort());

        const child = makeImage({ layers: 1 });
        const index = makeIndex([child]);
        expectError(await c.pushManifest(r, "broken-index", index.manifest, index.mediaType), 400, "MANIFEST_BLOB_UNKNOWN");
        expect(await snapshot(driver)).toEqual(before);
        expectError(await c.req("GET", `/v2/${r}/manifests/broken`, { headers: { accept: mt.ociManifest } }), 404, "MANIFEST_UNKNOWN");
      });

      it("refuses bad manifests with distribution's codes and writes nothing", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        for (const b of img.blobs) await c.pushBlob(r, b);
        const before = await snapshot(driver);
        // The digest in the URL must be the body's.
        expectError(await c.pushManifest(r, digestOf("something else"), img.manifest, img.mediaType), 400, "DIGEST_INVALID");
        expectError(await c.pushManifest(r, "sha256:baddigeststring", img.manifest, img.mediaType), 400, "DIGEST_INVALID");
        // Over 4 MiB.
        const big = JSON.stringify({ ...(JSON.parse(img.manifest) as object), annotations: { pad: "x".repeat(4 << 20) } });
        const tooBig = await c.pushManifest(r, "big", big, img.mediaType);
        expectError(tooBig, 400, "MANIFEST_INVALID");
        // Not JSON, wrong schema version, a Content-Type that contradicts mediaType, a bad descriptor digest.
        expectError(await c.pushManifest(r, "x", "not json", mt.ociManifest), 400, "MANIFEST_INVALID");
        expectError(await c.pushManifest(r, "x", JSON.stringify({ schemaVersion: 1, name: r, tag: "x", fsLayers: [] }), mt.ociManifest), 400, "MANIFEST_INVALID");
        expectError(await c.pushManifest(r, "x", img.manifest, mt.dockerManifest), 400, "MANIFEST_INVALID");
        const badDesc = JSON.stringify({ ...(JSON.parse(img.manifest) as object), config: { mediaType: mt.ociConfig, digest: "sha256:xyz", size: 2 } });
        expectError(await c.pushManifest(r, "x", badDesc, mt.ociManifest), 400, "MANIFEST_INVALID");
        expectError(await c.pushManifest(r, "x", JSON.stringify({ schemaVersion: 2, mediaType: mt.ociManifest }), mt.ociManifest), 400, "MANIFEST_INVALID");
        // Bad tags, in the path and in ?tag=.
        expectError(await c.pushManifest(r, "-bad", img.manifest, img.mediaType), 400, "TAG_INVALID");
        expectError(await c.req("PUT", `/v2/${r}/manifests/${img.digest}?tag=ok&tag=.bad`, { body: img.manifest, headers: { "content-type": img.mediaType } }), 400, "TAG_INVALID");
        expect(await snapshot(driver)).toEqual(before);
      });
    });

    describe("content discovery", () => {
      it("tags list: sorted, n and last, Link pagination, n=0, bad n, unknown repository", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        const tags = ["v1", "latest", "A", "b", "1.0", "_x", "v10", "v2"];
        await c.pushImage(r, tags[0]!, img);
        const q = tags.slice(1).map((t) => `tag=${t}`).join("&");
        expect((await c.req("PUT", `/v2/${r}/manifests/${img.digest}?${q}`, { body: img.manifest, headers: { "content-type": img.mediaType } })).status).toBe(201);
        const sorted = [...tags].sort();
        const all = await c.req("GET", `/v2/${r}/tags/list`);
        expect(all.json()).toEqual({ name: r, tags: sorted });
        expect(all.headers.get("link")).toBeNull();

        const seen: string[] = [];
        let next: string | undefined = `/v2/${r}/tags/list?n=3`;
        let pages = 0;
        while (next !== undefined) {
          const page = await c.req("GET", next);
          expect(page.status).toBe(200);
          const body = page.json<{ tags: string[] }>();
          expect(body.tags.length).toBeLessThanOrEqual(3);
          seen.push(...body.tags);
          const link = page.headers.get("link");
          next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
          pages++;
        }
        expect(seen).toEqual(sorted);
        expect(pages).toBe(3);
        expect((await c.req("GET", `/v2/${r}/tags/list?n=2&last=b`)).json()).toEqual({ name: r, tags: sorted.slice(sorted.indexOf("b") + 1, sorted.indexOf("b") + 3) });
        expect((await c.req("GET", `/v2/${r}/tags/list?last=latest`)).json<{ tags: string[] }>().tags).toEqual(sorted.filter((t) => t > "latest"));
        const zero = await c.req("GET", `/v2/${r}/tags/list?n=0`);
        expect(zero.json()).toEqual({ name: r, tags: [] });
        expect(zero.headers.get("link")).toBeNull();
        // Exactly the rest: no Link.
        expect((await c.req("GET", `/v2/${r}/tags/list?n=${tags.length}`)).headers.get("link")).toBeNull();
        for (const bad of ["-1", "abc", "1e3", "100001", "99999999999999999999"]) {
          expectError(await c.req("GET", `/v2/${r}/tags/list?n=${bad}`), 400, "PAGINATION_NUMBER_INVALID");
        }
        expectError(await c.req("GET", `/v2/${repo("never")}/tags/list`), 404, "NAME_UNKNOWN");
      });

      it("catalog: every repository with manifests (nested names), sorted, paginated with Link", async () => {
        // A registry of its own, so the catalog holds exactly these.
        const own = await factory();
        const s = await serveRegistry(own.driver);
        try {
          const cc = new Client(s.base);
          const names = ["zeta", "alpha/one", "alpha/one/deeper", "alpha-two", "b.c/d_e", "x__y"];
          for (const name of names) await cc.pushImage(name, "t", makeImage({ layers: 1, layerSize: 16 }));
          await cc.pushBlob("blobs-only", randomBytes(8));
          const all = await cc.req("GET", "/v2/_catalog");
          expect(all.json()).toEqual({ repositories: [...names].sort() });
          const seen: string[] = [];
          let next: string | undefined = "/v2/_catalog?n=2";
          while (next !== undefined) {
            const page = await cc.req("GET", next);
            seen.push(...page.json<{ repositories: string[] }>().repositories);
            const link = page.headers.get("link");
            next = link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)![1];
          }
          expect(seen).toEqual([...names].sort());
          expect((await cc.req("GET", "/v2/_catalog?last=alpha/one/deeper&n=2")).json()).toEqual({ repositories: ["b.c/d_e", "x__y"] });
          expectError(await cc.req("GET", "/v2/_catalog?n=1001"), 400, "PAGINATION_NUMBER_INVALID");
          expectError(await cc.req("GET", "/v2/_catalog?n=-1"), 400, "PAGINATION_NUMBER_INVALID");
          expect((await cc.req("GET", "/v2/_catalog?n=0")).json()).toEqual({ repositories: [] });
        } finally {
          await s.close();
          await own.driver.close();
          await own.cleanup();
        }
      });

      it("repository names and tags ending like the S3 driver's helper keys (.s3upload, .s3tail.0) are ordinary", async () => {
        const own = await factory();
        const s = await serveRegistry(own.driver);
        try {
          const cc = new Client(s.base);
          const names = ["shop/web", "shop/x.s3upload", "shop/y.s3tail.0", "z.s3upload/a"];
          const images = new Map<string, ReturnType<typeof makeImage>>();
          for (const name of names) {
            const img = makeImage({ layers: 1, layerSize: 32 });
            images.set(name, img);
            await cc.pushImage(name, "v1", img);
          }
          const web = images.get("shop/web")!;
          await cc.pushImage("shop/web", "v2.s3upload", web);
          await cc.pushImage("shop/x.s3upload", "v2.s3tail.1", images.get("shop/x.s3upload")!);
          const all = await cc.req("GET", "/v2/_catalog");
          expect(all.status, all.text).toBe(200);
          expect(all.json()).toEqual({ repositories: [...names].sort() });
          expect((await cc.req("GET", "/v2/shop/web/tags/list")).json()).toEqual({ name: "shop/web", tags: ["v1", "v2.s3upload"] });
          expect((await cc.req("GET", "/v2/shop/web/manifests/v2.s3upload", { headers: { accept: mt.ociManifest } })).status).toBe(200);
          expect((await cc.req("DELETE", "/v2/shop/web/manifests/v2.s3upload")).status).toBe(202);
          expect((await cc.req("GET", "/v2/shop/web/tags/list")).json()).toEqual({ name: "shop/web", tags: ["v1"] });
          expect((await cc.req("DELETE", `/v2/shop/web/manifests/${web.digest}`)).status).toBe(202);
          const x = images.get("shop/x.s3upload")!;
          expect((await cc.req("DELETE", `/v2/shop/x.s3upload/manifests/${x.digest}`)).status).toBe(202);
          expectError(await cc.req("GET", "/v2/shop/x.s3upload/manifests/v2.s3tail.1", { headers: { accept: mt.ociManifest } }), 404, "MANIFEST_UNKNOWN");
          expect((await cc.req("DELETE", `/v2/shop/x.s3upload/blobs/${digestOf(x.blobs[1]!)}`)).status).toBe(202);
          // An upload in such a repository, cancelled.
          const loc = cc.url((await cc.req("POST", "/v2/shop/x.s3upload/blobs/uploads/")).headers.get("location"));
          await cc.req("PATCH", loc, { body: randomBytes(100) });
          expect((await cc.req("DELETE", loc)).status).toBe(204);
          expect((await cc.req("GET", "/v2/_catalog")).status).toBe(200);
        } finally {
          await s.close();
          await own.driver.close();
          await own.cleanup();
        }
      });

      it("referrers: an index of the manifests whose subject is the digest, artifactType from the manifest or its config, filter, OCI-Subject", async () => {
        const r = repo();
        const subject = makeImage({ layers: 1 });
        await c.pushImage(r, "app", subject);
        const subjectDesc = { mediaType: subject.mediaType, digest: subject.digest, size: Buffer.byteLength(subject.manifest) };
        // Before any referrer, and for a subject that does not exist: 200 and an empty index.
        for (const d of [subject.digest, digestOf(randomBytes(4))]) {
          const empty = await c.req("GET", `/v2/${r}/referrers/${d}`);
          expect(empty.status).toBe(200);
          expect(empty.headers.get("content-type")).toBe(mt.ociIndex);
          expect(empty.json()).toEqual({ schemaVersion: 2, mediaType: mt.ociIndex, manifests: [] });
        }

        const sbom = makeImage({ layers: 1, subject: subjectDesc, artifactType: "application/vnd.example.sbom.v1", annotations: { "org.example.format": "json" }, configType: mt.ociEmpty });
        const sig = makeImage({ layers: 1, subject: subjectDesc, configType: "application/vnd.example.signature.config.v1+json" });
        for (const art of [sbom, sig]) {
          for (const b of art.blobs) await c.pushBlob(r, b);
          const put = await c.pushManifest(r, art.digest, art.manifest, art.mediaType);
          expect(put.status, put.text).toBe(201);
          expect(put.headers.get("oci-subject")).toBe(subject.digest);
        }
        // An index can refer too (no artifactType: none in the descriptor).
        const idx = makeIndex([sig], { subject: subjectDesc });
        expect((await c.pushManifest(r, idx.digest, idx.manifest, idx.mediaType)).headers.get("oci-subject")).toBe(subject.digest);

        const all = await c.req("GET", `/v2/${r}/referrers/${subject.digest}`);
        const body = all.json<{ manifests: Record<string, unknown>[] }>();
        const byDigest = new Map(body.manifests.map((m) => [m.digest, m]));
        expect(byDigest.size).toBe(3);
        expect(byDigest.get(sbom.digest)).toEqual({
          mediaType: mt.ociManifest,
          digest: sbom.digest,
          size: Buffer.byteLength(sbom.manifest),
          artifactType: "application/vnd.example.sbom.v1",
          annotations: { "org.example.format": "json" },
        });
        expect(byDigest.get(sig.digest)?.artifactType).toBe("application/vnd.example.signature.config.v1+json");
        expect(byDigest.get(idx.digest)).toEqual({ mediaType: mt.ociIndex, digest: idx.digest, size: Buffer.byteLength(idx.manifest) });
        expect(all.headers.get("oci-filters-applied")).toBeNull();

        const filtered = await c.req("GET", `/v2/${r}/referrers/${subject.digest}?artifactType=${encodeURIComponent("application/vnd.example.sbom.v1")}`);
        expect(filtered.headers.get("oci-filters-applied")).toBe("artifactType");
        expect(filtered.json<{ manifests: { digest: string }[] }>().manifests.map((m) => m.digest)).toEqual([sbom.digest]);
        expect((await c.req("GET", `/v2/${r}/referrers/${subject.digest}?artifactType=none/such`)).json<{ manifests: unknown[] }>().manifests).toEqual([]);

        // Deleting a referrer takes it out of the index.
        expect((await c.req("DELETE", `/v2/${r}/manifests/${sbom.digest}`)).status).toBe(202);
        const after = (await c.req("GET", `/v2/${r}/referrers/${subject.digest}`)).json<{ manifests: { digest: string }[] }>();
        expect(after.manifests.map((m) => m.digest).sort()).toEqual([sig.digest, idx.digest].sort());

        expectError(await c.req("GET", `/v2/${r}/referrers/sha256:nothex`), 400, "DIGEST_INVALID");
        expect((await c.req("GET", `/v2/${repo("none")}/referrers/${subject.digest}`)).status).toBe(200);
      });
    });

    describe("content management", () => {
      it("DELETE of a tag untags only; DELETE by digest removes the manifest and every tag on it; blobs are unlinked", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        await c.pushImage(r, "keep", img);
        await c.req("PUT", `/v2/${r}/manifests/${img.digest}?tag=one&tag=two`, { body: img.manifest, headers: { "content-type": img.mediaType } });
        const other = makeImage({ layers: 1 });
        await c.pushImage(r, "other", other);
        const accept = { accept: mt.ociManifest };

        expect((await c.req("DELETE", `/v2/${r}/manifests/one`)).status).toBe(202);
        expectError(await c.req("GET", `/v2/${r}/manifests/one`, { headers: accept }), 404, "MANIFEST_UNKNOWN");
        expect((await c.req("GET", `/v2/${r}/manifests/${img.digest}`, { headers: accept })).status).toBe(200);
        expect((await c.req("GET", `/v2/${r}/tags/list`)).json<{ tags: string[] }>().tags).toEqual(["keep", "other", "two"]);
        expectError(await c.req("DELETE", `/v2/${r}/manifests/one`), 404, "MANIFEST_UNKNOWN");

        expect((await c.req("DELETE", `/v2/${r}/manifests/${img.digest}`)).status).toBe(202);
        for (const ref of [img.digest, "keep", "two"]) expectError(await c.req("GET", `/v2/${r}/manifests/${ref}`, { headers: accept }), 404, "MANIFEST_UNKNOWN");
        expect((await c.req("GET", `/v2/${r}/tags/list`)).json<{ tags: string[] }>().tags).toEqual(["other"]);
        expect((await c.req("GET", `/v2/${r}/manifests/other`, { headers: accept })).status).toBe(200);
        expectError(await c.req("DELETE", `/v2/${r}/manifests/${img.digest}`), 404, "MANIFEST_UNKNOWN");

        const layer = digestOf(img.blobs[1]!);
        expect((await c.req("DELETE", `/v2/${r}/blobs/${layer}`)).status).toBe(202);
        expectError(await c.req("GET", `/v2/${r}/blobs/${layer}`), 404, "BLOB_UNKNOWN");
        expectError(await c.req("DELETE", `/v2/${r}/blobs/${layer}`), 404, "BLOB_UNKNOWN");
        // Only the link went: the bytes stay for garbage collection.
        expect([...(await snapshot(driver)).keys()].some((p) => p.endsWith(`/${layer.slice(7)}/data`))).toBe(true);
      });

      it("with deletes disabled every DELETE is 405 UNSUPPORTED and changes nothing", async () => {
        const s = await serveRegistry(driver, { deleteEnabled: false });
        try {
          const cc = new Client(s.base);
          const r = repo();
          const img = makeImage({ layers: 1 });
          await cc.pushImage(r, "t", img);
          const before = await snapshot(driver);
          expectError(await cc.req("DELETE", `/v2/${r}/manifests/t`), 405, "UNSUPPORTED");
          expectError(await cc.req("DELETE", `/v2/${r}/manifests/${img.digest}`), 405, "UNSUPPORTED");
          expectError(await cc.req("DELETE", `/v2/${r}/blobs/${digestOf(img.blobs[1]!)}`), 405, "UNSUPPORTED");
          expect(await snapshot(driver)).toEqual(before);
          // Cancelling an upload is not a delete of content.
          const loc = cc.url((await cc.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
          expect((await cc.req("DELETE", loc)).status).toBe(204);
        } finally {
          await s.close();
        }
      });
    });

    describe("range reads", () => {
      it("206 with Content-Range for bytes=500-1499, 500-, -500, 2000-5000 (clipped); 416 for 500-0 and 5000-10000", async () => {
        const r = repo();
        const bytes = randomBytes(2048);
        const d = await c.pushBlob(r, bytes);
        const get = (range: string) => c.req("GET", `/v2/${r}/blobs/${d}`, { headers: { range } });
        const cases: [string, number, number][] = [
          ["bytes=500-1499", 500, 1499],
          ["bytes=500-", 500, 2047],
          ["bytes=-500", 1548, 2047],
          ["bytes=2000-5000", 2000, 2047],
        ];
        for (const [range, start, end] of cases) {
          const a = await get(range);
          expect(a.status, range).toBe(206);
          expect(a.headers.get("content-length")).toBe(String(end - start + 1));
          expect(a.headers.get("content-range")).toBe(`bytes ${start}-${end}/2048`);
          expect(a.body.equals(bytes.subarray(start, end + 1))).toBe(true);
        }
        for (const range of ["bytes=500-0", "bytes=5000-10000"]) {
          const a = await get(range);
          expect(a.status, range).toBe(416);
          expect(a.headers.get("content-range")).toBe("bytes */2048");
        }
        const head = await c.req("HEAD", `/v2/${r}/blobs/${d}`, { headers: { range: "bytes=0-9" } });
        expect(head.status).toBe(206);
        expect(head.headers.get("content-length")).toBe("10");
        // Several ranges: the whole blob (a 200 is always allowed).
        expect((await get("bytes=0-1,5-6")).status).toBe(200);
      });
    });

    describe("range reads of the empty blob", () => {
      it("any well-formed Range gets 200 and the empty body (Go's ServeContent); a malformed one is 416", async () => {
        const r = repo();
        const d = await c.pushBlob(r, Buffer.alloc(0));
        for (const range of ["bytes=0-", "bytes=0-0", "bytes=0-1023", "bytes=-1", "bytes=5-"]) {
          for (const method of ["GET", "HEAD"]) {
            const a = await c.req(method, `/v2/${r}/blobs/${d}`, { headers: { range } });
            expect(a.status, `${method} ${range}`).toBe(200);
            expect(a.headers.get("content-length")).toBe("0");
            expect(a.headers.get("content-range")).toBeNull();
            expect(a.body.length).toBe(0);
          }
        }
        expect((await c.req("GET", `/v2/${r}/blobs/${d}`, { headers: { range: "bytes=x-y" } })).status).toBe(416);
      });
    });

    describe("uploads across a restart", () => {
      for (const algorithm of ["sha256", "sha512"] as const) {
        it(`a new registry on the same storage continues an upload: PATCHes go on, GET shows the Range, PUT checks the ${algorithm} of all the bytes`, async () => {
          const r = repo();
          const bytes = randomBytes(300_000);
          const d = digestOf(bytes, algorithm);
          const first = await serveRegistry(driver);
          const c1 = new Client(first.base);
          const post = await c1.req("POST", `/v2/${r}/blobs/uploads/?digest-algorithm=${algorithm}`);
          const path = post.headers.get("location")!;
          expect((await c1.req("PATCH", path, { body: bytes.subarray(0, 100_000), headers: { "content-range": "0-99999" } })).status).toBe(202);
          await first.close();

          const second = await fx.reopen();
          const s2 = await serveRegistry(second);
          try {
            const c2 = new Client(s2.base);
            const status = await c2.req("GET", path);
            expect(status.status).toBe(204);
            expect(status.headers.get("range")).toBe("0-99999");
            expectError(await c2.req("PATCH", path, { body: bytes.subarray(0, 10), headers: { "content-range": "0-9" } }), 416, "RANGE_INVALID");
            expect((await c2.req("PATCH", path, { body: bytes.subarray(100_000, 200_000), headers: { "content-range": "100000-199999" } })).status).toBe(202);
            const put = await c2.req("PUT", `${path}?digest=${d}`, { body: bytes.subarray(200_000), headers: { "content-range": `200000-${bytes.length - 1}` } });
            expect(put.status, put.text).toBe(201);
            expect(put.headers.get("docker-content-digest")).toBe(d);
            const got = await c2.req("GET", `/v2/${r}/blobs/${d}`);
            expect(got.body.equals(bytes)).toBe(true);
            expect(digestOf(got.body, algorithm)).toBe(d);
            // The original registry's storage sees it too.
            expect((await c.req("HEAD", `/v2/${r}/blobs/${d}`)).status).toBe(200);
          } finally {
            await s2.close();
            await second.close();
          }
        });
      }

      it("a wrong digest after a restart is still 400 DIGEST_INVALID, and the upload is gone", async () => {
        const r = repo();
        const first = await serveRegistry(driver);
        const path = (await new Client(first.base).req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location")!;
        await new Client(first.base).req("PATCH", path, { body: randomBytes(5000) });
        await first.close();
        const second = await fx.reopen();
        const s2 = await serveRegistry(second);
        try {
          const c2 = new Client(s2.base);
          expectError(await c2.req("PUT", `${path}?digest=${digestOf(randomBytes(4))}`), 400, "DIGEST_INVALID");
          expectError(await c2.req("GET", path), 404, "BLOB_UPLOAD_UNKNOWN");
        } finally {
          await s2.close();
          await second.close();
        }
      });
    });

    describe("sha512", () => {
      it("blobs pushed and pulled by sha512 digest (monolithic and chunked), manifests addressed by sha512", async () => {
        const r = repo();
        const bytes = randomBytes(4096);
        const d = await c.pushBlob(r, bytes, "sha512");
        expect(d).toMatch(/^sha512:[0-9a-f]{128}$/);
        const get = await c.req("GET", `/v2/${r}/blobs/${d}`);
        expect(get.body.equals(bytes)).toBe(true);
        expect(get.headers.get("docker-content-digest")).toBe(d);

        const chunked = randomBytes(3000);
        const cd = digestOf(chunked, "sha512");
        const loc = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/?digest-algorithm=sha512`)).headers.get("location"));
        await c.req("PATCH", loc, { body: chunked.subarray(0, 1500), headers: { "content-range": "0-1499" } });
        expect((await c.req("PUT", `${loc}?digest=${cd}`, { body: chunked.subarray(1500), headers: { "content-range": "1500-2999" } })).status).toBe(201);
        expect((await c.req("GET", `/v2/${r}/blobs/${cd}`)).body.equals(chunked)).toBe(true);
        // A sha256 session closed with a sha512 digest: the bytes are re-read and hashed with sha512.
        const other = randomBytes(100);
        const loc2 = c.url((await c.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location"));
        expect((await c.req("PUT", `${loc2}?digest=${digestOf(other, "sha512")}`, { body: other })).status).toBe(201);

        const img = makeImage({ layers: 1 });
        for (const b of img.blobs) await c.pushBlob(r, b);
        const md = digestOf(img.manifest, "sha512");
        const put = await c.pushManifest(r, md, img.manifest, img.mediaType);
        expect(put.status, put.text).toBe(201);
        expect(put.headers.get("docker-content-digest")).toBe(md);
        const m = await c.req("GET", `/v2/${r}/manifests/${md}`, { headers: { accept: mt.ociManifest } });
        expect(m.status).toBe(200);
        expect(m.text).toBe(img.manifest);
        // Unsupported algorithms are refused.
        expectError(await c.req("GET", `/v2/${r}/blobs/sha384:${"a".repeat(96)}`), 400, "DIGEST_INVALID");
        expectError(await c.req("POST", `/v2/${r}/blobs/uploads/?digest-algorithm=md5`), 400, "DIGEST_INVALID");
      });
    });

    describe("bad input: the right 4xx and nothing written", () => {
      it("invalid repository names, digests, upload ids, methods and paths", async () => {
        const r = repo();
        const img = makeImage({ layers: 1 });
        await c.pushImage(r, "t", img);
        const d = digestOf(img.blobs[1]!);
        const before = await snapshot(driver);
        const badNames = ["Upper/case", `${r}/../b`, `${r}/./b`, "a//b", "-lead", "trail-", "a%2Fb", "a/_layers", `${"a".repeat(256)}`, "a:b", "a/.."];
        for (const name of badNames) {
          // The path goes out as written: a `..` must not be resolved by the client (nor by the server).
          const post = await c.raw("POST", `/v2/${name}/blobs/uploads/?digest=${d}`, img.blobs[1]!);
          expect([400, 404], `${name}: ${post.status} ${post.text}`).toContain(post.status);
          const put = await c.raw("PUT", `/v2/${name}/manifests/t`, img.manifest);
          expect([400, 404], `${name}: ${put.status} ${put.text}`).toContain(put.status);
          expect((await c.raw("GET", `/v2/${name}/tags/list`)).status, name).toBeGreaterThanOrEqual(400);
        }
        for (const name of ["Upper/case", "a//b", "-lead", "a%2Fb", "a/_layers", "a:b"]) {
          expectError(await c.req("POST", `/v2/${name}/blobs/uploads/?digest=${d}`, { body: img.blobs[1]! }), 400, "NAME_INVALID");
        }
        expectError(await c.req("GET", `/v2/Upper/tags/list`), 400, "NAME_INVALID");
        for (const digest of ["sha256:xyz", `sha256:${"A".repeat(64)}`, `sha256:${"a".repeat(63)}`, "md5:abc", "notadigest", "sha256:"]) {
          const a = await c.req("GET", `/v2/${r}/blobs/${digest}`);
          expectError(a, 400, "DIGEST_INVALID");
          expectError(await c.req("POST", `/v2/${r}/blobs/uploads/?digest=${encodeURIComponent(digest)}`, { body: "x" }), 400, "DIGEST_INVALID");
        }
        const loc = (await c.req("POST", `/v2/${r}/blobs/uploads/`)).headers.get("location")!;
        const afterPost = await snapshot(driver);
        expectError(await c.req("PUT", loc, { body: "x" }), 400, "DIGEST_INVALID");
        expectError(await c.req("PUT", `${loc}?digest=sha256:zz`, { body: "x" }), 400, "DIGEST_INVALID");
        expect(await snapshot(driver)).toEqual(afterPost);
        await c.req("DELETE", loc);
        for (const id of ["not-a-uuid", "..", "00000000-0000-0000-0000-000000000000"]) {
          const a = await c.req("PATCH", `/v2/${r}/blobs/uploads/${id}`, { body: "x" });
          expect(a.status, id).toBe(404);
        }
        expectError(await c.req("POST", `/v2/${r}/manifests/t`), 405, "UNSUPPORTED");
        expectError(await c.req("PUT", `/v2/${r}/blobs/${d}`, { body: "x" }), 405, "UNSUPPORTED");
        expect((await c.req("GET", "/v2/nothing-here")).status).toBe(404);
        expect(await snapshot(driver)).toEqual(before);
      });
    });

    describe("access", () => {
      it("asks the authorizer for distribution's scopes per route", async () => {
        const auth = new RecordingAuthorizer();
        const s = await serveRegistry(driver, { authorizer: auth });
        try {
          const cc = new Client(s.base);
          const r = repo();
          const src = repo("src");
          const bytes = randomBytes(64);
          const d = await cc.pushBlob(src, bytes);
          const expectAsked = async (method: string, path: string, needed: unknown, init: { body?: string } = {}) => {
            auth.asked.length = 0;
            await cc.req(method, path, { ...init, headers: { authorization: "Bearer t0ken" } });
            expect(auth.asked, `${method} ${path}`).toEqual([{ authorization: "Bearer t0ken", needed }]);
          };
          const pull = (name: string) => ({ type: "repository", name, actions: ["pull"] });
          const push = (name: string) => ({ type: "repository", name, actions: ["pull", "push"] });
          await expectAsked("GET", "/v2/", []);
          await expectAsked("GET", "/v2/_catalog", [{ type: "registry", name: "catalog", actions: ["*"] }]);
          await expectAsked("GET", `/v2/${r}/tags/list`, [pull(r)]);
          await expectAsked("HEAD", `/v2/${src}/blobs/${d}`, [pull(src)]);
          await expectAsked("GET", `/v2/${r}/manifests/latest`, [pull(r)]);
          await expectAsked("POST", `/v2/${r}/blobs/uploads/?mount=${d}&from=${src}`, [push(r), pull(src)]);
          await expectAsked("PUT", `/v2/${r}/manifests/latest`, [push(r)], { body: "{}" });
          await expectAsked("DELETE", `/v2/${r}/manifests/latest`, [{ type: "repository", name: r, actions: ["delete"] }]);
          await expectAsked("GET", `/v2/${r}/referrers/${d}`, [pull(r)]);
        } finally {
          await s.close();
        }
      });

      it("a refusal is 401 UNAUTHORIZED with the challenge and distribution's detail, and nothing is written", async () => {
        const auth = new RecordingAuthorizer();
        const challenge = 'Bearer realm="http://127.0.0.1:1/token",service="registry.test",scope="repository:x:pull,push"';
        auth.decide = () => ({ ok: false, challenge, error: "insufficient_scope" });
        const s = await serveRegistry(driver, { authorizer: auth });
        try {
          const cc = new Client(s.base);
          const r = repo();
          const before = await snapshot(driver);
          const a = await cc.req("POST", `/v2/${r}/blobs/uploads/?digest=${digestOf("x")}`, { body: "x" });
          expectError(a, 401, "UNAUTHORIZED");
          expect(a.headers.get("www-authenticate")).toBe(challenge);
          expect(a.json<ErrorsBody>().errors[0]).toEqual({
            code: "UNAUTHORIZED",
            message: "authentication required",
            detail: [
              { Type: "repository", Class: "", Name: r, Action: "pull" },
              { Type: "repository", Class: "", Name: r, Action: "push" },
            ],
          });
          const base = await cc.req("GET", "/v2/");
          expectError(base, 401, "UNAUTHORIZED");
          expect(base.json<ErrorsBody>().errors[0]!.detail).toEqual([]);
          expect(await snapshot(driver)).toEqual(before);
        } finally {
          await s.close();
        }
      });
    });
  });
}
