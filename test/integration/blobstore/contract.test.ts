// The StorageDriver contract on both drivers: FilesystemDriver on a temporary directory and S3Driver
// against the s3rver that `scripts/services start` runs (each test its own rootdirectory in the
// services' bucket). Then what only the S3 driver has: its key layout, two instances on one bucket,
// listing and deleting across pages, the writer's upload state, timeouts and error messages.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { InvalidPathError, PathNotFoundError, WriterConflictError, type StorageDriver } from "../../../adapters/blobstore/driver.ts";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { S3Driver, S3DriverError, type S3DriverOptions } from "../../../adapters/blobstore/s3.ts";
import { driverContract, pattern, readAll, type ContractStore } from "../../helpers/blobstore-contract.ts";
import { s3DriverOptions, s3Service, uniqueName, type S3Service } from "../../helpers/services.ts";

const MiB = 1024 * 1024;

// --- filesystem ----------------------------------------------------------------------------------------
driverContract("filesystem", async () => {
  const dir = await mkdtemp(join(tmpdir(), "capstan-blobstore-"));
  const rootDirectory = join(dir, "root");
  return {
    driver: new FilesystemDriver({ rootDirectory }),
    reopen: async () => new FilesystemDriver({ rootDirectory }),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

// --- S3 on s3rver -------------------------------------------------------------------------------------


function rawClient(s3: S3Service): S3Client {
  return new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKey, secretAccessKey: s3.secretKey },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
}

let bucketReady: Promise<void> | undefined;
/** The services' bucket exists (s3rver is started with it; made here too, should it be missing). */
function ensureBucket(s3: S3Service): Promise<void> {
  bucketReady ??= (async () => {
    const c = rawClient(s3);
    try {
      await c.send(new CreateBucketCommand({ Bucket: s3.bucket }), { abortSignal: AbortSignal.timeout(10_000) });
    } catch (err) {
      const name = (err as Error).name;
      if (name !== "BucketAlreadyOwnedByYou" && name !== "BucketAlreadyExists") throw err;
    } finally {
      c.destroy();
    }
  })();
  return bucketReady;
}

async function allKeys(s3: S3Service, prefix: string): Promise<string[]> {
  const c = rawClient(s3);
  try {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await c.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }), {
        abortSignal: AbortSignal.timeout(10_000),
      });
      keys.push(...(page.Contents ?? []).map((o) => o.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys.sort();
  } finally {
    c.destroy();
  }
}

/** A store of its own: a unique rootdirectory; cleanup deletes it and closes every driver. */
async function s3Store(more: Partial<S3DriverOptions> = {}): Promise<ContractStore & { root: string; options: S3DriverOptions }> {
  const s3 = s3Service();
  await ensureBucket(s3);
  const root = uniqueName("blobstore");
  const options = s3DriverOptions(`/${root}`, more, s3);
  const drivers: StorageDriver[] = [];
  const open = () => {
    const d = new S3Driver(options);
    drivers.push(d);
    return d;
  };
  const driver = open();
  return {
    root,
    options,
    driver,
    reopen: async () => open(),
    cleanup: async () => {
      await driver.delete("/").catch((err: unknown) => {
        if (!(err instanceof PathNotFoundError)) throw err;
      });
      await Promise.all(drivers.map((d) => d.close()));
    },
  };
}

driverContract("s3 (s3rver)", () => s3Store());

describe("S3Driver specifics (s3rver)", () => {
  let s3: S3Service;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    s3 = s3Service();
    await ensureBucket(s3);
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });
  async function store(more: Partial<S3DriverOptions> = {}) {
    const st = await s3Store(more);
    cleanups.push(st.cleanup);
    return st;
  }

  it("keys are <rootdirectory without leading slash>/docker/registry/v2/..., as distribution lays them out", async () => {
    const st = await store();
    const path = "/docker/registry/v2/blobs/sha256/ab/ab12/data";
    await st.driver.putContent(path, Buffer.from("blob"));
    expect(await allKeys(s3, `${st.root}/`)).toEqual([`${st.root}/docker/registry/v2/blobs/sha256/ab/ab12/data`]);
    // A trailing slash on rootdirectory changes nothing.
    const other = new S3Driver({ ...st.options, rootDirectory: `/${st.root}/` });
    try {
      expect((await other.getContent(path)).toString()).toBe("blob");
      expect(await other.list("/docker/registry/v2/blobs/sha256")).toEqual(["/docker/registry/v2/blobs/sha256/ab"]);
    } finally {
      await other.close();
    }
  });

  it("two instances on one bucket see each other's objects, uploads and deletions", async () => {
    const st = await store();
    const a = st.driver;
    const b = await st.reopen();
    await a.putContent("/docker/registry/v2/repositories/r/_manifests/tags/t/current/link", Buffer.from("sha256:aa"));
    expect((await b.getContent("/docker/registry/v2/repositories/r/_manifests/tags/t/current/link")).toString()).toBe("sha256:aa");
    expect(await b.list("/docker/registry/v2/repositories/r/_manifests/tags")).toEqual(["/docker/registry/v2/repositories/r/_manifests/tags/t"]);
    await b.putContent("/docker/registry/v2/repositories/r/_manifests/tags/t/current/link", Buffer.from("sha256:bb"));
    expect((await a.getContent("/docker/registry/v2/repositories/r/_manifests/tags/t/current/link")).toString()).toBe("sha256:bb");

    // An upload started on one instance, continued on the other (a PATCH landing elsewhere), committed on the first.
    const upload = "/docker/registry/v2/repositories/r/_uploads/u/data";
    const data = pattern(11 * MiB + 5, 61);
    const wa = await a.writer(upload, false);
    await wa.write(data.subarray(0, 10 * MiB + 3));
    await wa.close();
    const wb = await b.writer(upload, true);
    expect(wb.size).toBe(10 * MiB + 3);
    await wb.write(data.subarray(10 * MiB + 3, 11 * MiB));
    await wb.close();
    const wa2 = await a.writer(upload, true);
    expect(wa2.size).toBe(11 * MiB);
    await wa2.write(data.subarray(11 * MiB));
    await wa2.commit();
    await b.move(upload, "/docker/registry/v2/blobs/sha256/cc/cc/data");
    expect((await a.getContent("/docker/registry/v2/blobs/sha256/cc/cc/data")).equals(data)).toBe(true);

    await b.delete("/docker/registry/v2/repositories/r");
    await expect(a.stat("/docker/registry/v2/repositories/r")).rejects.toBeInstanceOf(PathNotFoundError);
    expect(await a.list("/docker/registry/v2")).toEqual(["/docker/registry/v2/blobs"]);
  });

  it("lists and deletes across ListObjectsV2 pages", async () => {
    const st = await store({ listPageSize: 3 });
    const names = Array.from({ length: 10 }, (_, i) => `/pg/f${i}`);
    await Promise.all(names.map((n) => st.driver.putContent(n, Buffer.from(n))));
    await Promise.all([1, 2, 3, 4].map((i) => st.driver.putContent(`/pg/d${i}/x/y`, Buffer.from("y"))));
    expect((await st.driver.list("/pg")).sort()).toEqual([...names, "/pg/d1", "/pg/d2", "/pg/d3", "/pg/d4"].sort());
    await st.driver.delete("/pg");
    expect(await allKeys(s3, `${st.root}/`)).toEqual([]);
  });

  it("the writer's helper keys: gone after commit and cancel, unreachable as paths, hidden from list", async () => {
    const st = await store();
    const w = await st.driver.writer("/u/data", false);
    await w.write(pattern(6 * MiB, 71)); // part 1 at close
    await w.close();
    const w2 = await st.driver.writer("/u/data", true);
    await w2.write(Buffer.from("tail"));
    await w2.close();
    expect(await allKeys(s3, `${st.root}/`)).toEqual([`${st.root}/u/data~s3tail.0`, `${st.root}/u/data~s3upload`]);
    expect(await st.driver.list("/u")).toEqual([]);
    const w3 = await st.driver.writer("/u/data", true);
    await w3.write(Buffer.from("more"));
    await w3.close(); // the other tail slot, then the state
    expect(await allKeys(s3, `${st.root}/`)).toEqual([`${st.root}/u/data~s3tail.0`, `${st.root}/u/data~s3tail.1`, `${st.root}/u/data~s3upload`]);
    const w4 = await st.driver.writer("/u/data", true);
    expect(w4.size).toBe(6 * MiB + 8);
    await w4.commit();
    expect(await allKeys(s3, `${st.root}/`)).toEqual([`${st.root}/u/data`]);
    expect((await st.driver.getContent("/u/data")).subarray(6 * MiB).toString()).toBe("tailmore");

    const c = await st.driver.writer("/u/cancelled", false);
    await c.write(Buffer.from("x"));
    await c.close();
    const c2 = await st.driver.writer("/u/cancelled", true);
    await c2.cancel();
    expect(await allKeys(s3, `${st.root}/`)).toEqual([`${st.root}/u/data`]);
    await expect(st.driver.writer("/u/cancelled", true)).rejects.toBeInstanceOf(PathNotFoundError);

    for (const p of ["/u/data~s3upload", "/u/data~s3tail.0", "/u/data~s3tail.1"]) {
      await expect(st.driver.getContent(p)).rejects.toBeInstanceOf(InvalidPathError);
      await expect(st.driver.writer(p, false)).rejects.toBeInstanceOf(InvalidPathError);
    }
  });

  it("paths that end like the old helper keys (.s3upload, .s3tail.0) are ordinary objects and directories", async () => {
    const st = await store();
    const d = st.driver;
    const names = ["/n/x.s3upload", "/n/x.s3tail.0", "/n/x.s3tail.1"];
    for (const p of names) {
      await d.putContent(p, Buffer.from(p));
      expect((await d.getContent(p)).toString()).toBe(p);
      expect(await d.stat(p)).toMatchObject({ path: p, size: p.length, isDir: false });
    }
    await d.putContent("/n/repo.s3upload/_manifests/tags/v2.s3upload/current/link", Buffer.from("sha256:aa"));
    expect((await d.list("/n")).sort()).toEqual([...names, "/n/repo.s3upload"].sort());
    expect(await d.list("/n/repo.s3upload/_manifests/tags")).toEqual(["/n/repo.s3upload/_manifests/tags/v2.s3upload"]);
    const w = await d.writer("/n/up.s3upload/data.s3upload", false);
    await w.write(Buffer.from("pending"));
    await w.close();
    const w2 = await (await st.reopen()).writer("/n/up.s3upload/data.s3upload", true);
    expect(w2.size).toBe(7);
    await w2.commit();
    expect((await d.getContent("/n/up.s3upload/data.s3upload")).toString()).toBe("pending");
    await d.move("/n/x.s3upload", "/n/moved.s3tail.0");
    await d.delete("/n/repo.s3upload/_manifests/tags/v2.s3upload");
    await expect(d.stat("/n/repo.s3upload/_manifests/tags")).rejects.toBeInstanceOf(PathNotFoundError);
    await d.delete("/n");
    expect(await allKeys(s3, `${st.root}/`)).toEqual([]);
  });

  it("two writers opened on one upload state (two instances): the second to write fails, the first's bytes stand", async () => {
    const st = await store({ chunkSize: 5 * MiB });
    const a = st.driver;
    const b = await st.reopen();
    const path = "/docker/registry/v2/repositories/r/_uploads/u/data";
    const w0 = await a.writer(path, false);
    await w0.close();
    const x = pattern(6 * MiB, 101);
    const y = pattern(6 * MiB, 102);
    // Both open on the same state; A writes a part and a tail and closes; B's first write fails.
    const wa = await a.writer(path, true);
    const wb = await b.writer(path, true);
    expect(wa.version).toBe(wb.version);
    await wa.write(x);
    await wa.close();
    await expect(wb.write(y)).rejects.toBeInstanceOf(WriterConflictError);
    await wb.close(); // nothing of B's is made durable
    const wc = await b.writer(path, true);
    expect(wc.size).toBe(x.length);
    expect(wc.version).toBe(wa.version);
    await wc.commit();
    expect((await a.getContent(path)).equals(x)).toBe(true);

    // Interleaved the other way: both write (B after A's claim), A's close and B's part fail in turn.
    const path2 = `${path}2`;
    await (await a.writer(path2, false)).close();
    const wa2 = await a.writer(path2, true);
    const wb2 = await b.writer(path2, true);
    await wb2.write(Buffer.from("b first"));
    await expect(wa2.write(x)).rejects.toBeInstanceOf(WriterConflictError);
    await wb2.close();
    // A writer whose upload was committed by another meanwhile cannot commit over it.
    const wa3 = await a.writer(path2, true);
    const wb3 = await b.writer(path2, true);
    await wb3.commit();
    await wa3.write(Buffer.from("late")).catch(() => {});
    await expect(wa3.commit()).rejects.toBeInstanceOf(WriterConflictError);
    expect((await a.getContent(path2)).toString()).toBe("b first");
  });

  it("a writer that was never closed resumes from the last close (parts uploaded since are redone)", async () => {
    const st = await store();
    const first = pattern(200_000, 81);
    const w1 = await st.driver.writer("/c/data", false);
    await w1.write(first);
    await w1.close();
    // A process that wrote past a whole chunk (a part went up) and died without close().
    const w2 = await (await st.reopen()).writer("/c/data", true);
    await w2.write(pattern(10 * MiB + 1, 82));
    const w3 = await (await st.reopen()).writer("/c/data", true);
    expect(w3.size).toBe(first.length);
    const rest = pattern(10 * MiB + 7, 83);
    await w3.write(rest);
    await w3.commit();
    const got = await st.driver.getContent("/c/data");
    expect(got.length).toBe(first.length + rest.length);
    expect(got.equals(Buffer.concat([first, rest]))).toBe(true);
  });

  it("errors name the operation and the key, never the secret key; a missing bucket is not PathNotFound", async () => {
    // s3rver does not check v4 signatures, but it does refuse an unknown access key.
    const secret = "not-the-right-secret-Zq8x";
    const bad = new S3Driver(s3DriverOptions("/secret-test", { accessKey: "UNKNOWNKEY", secretKey: secret }));
    try {
      const err = await bad.getContent("/some/key").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(S3DriverError);
      const e = err as S3DriverError;
      expect(e.operation).toBe("GetObject");
      expect(e.code).toBe("InvalidAccessKeyId");
      expect(e.message).toContain("GetObject");
      expect(e.message).toContain("secret-test/some/key");
      expect(e.message).not.toContain(secret);
      expect(inspect(e, { depth: 10 })).not.toContain(secret);
      expect(inspect(bad, { depth: 10 })).not.toContain(secret);
    } finally {
      await bad.close();
    }
    const nobucket = new S3Driver(s3DriverOptions("/x", { bucket: uniqueName("nobucket").toLowerCase() }));
    try {
      const err = await nobucket.getContent("/k").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(S3DriverError);
      expect((err as S3DriverError).code).toBe("NoSuchBucket");
      await expect(nobucket.list("/")).rejects.toBeInstanceOf(S3DriverError);
    } finally {
      await nobucket.close();
    }
  });

  describe("timeouts", () => {
    let server: Server;
    const sockets = new Set<Socket>();
    let endpoint: string;
    beforeAll(async () => {
      // Accepts connections and never answers.
      server = createServer((s) => {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {});
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    });
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    });

    it("every call gives up after its time limit, naming the operation and key", async () => {
      const d = new S3Driver({ ...s3DriverOptions("/t", { regionEndpoint: endpoint }), timeoutMs: 400, idleTimeoutMs: 60_000 });
      try {
        const t0 = Date.now();
        const err = await d.getContent("/k").catch((e: unknown) => e);
        expect(Date.now() - t0).toBeLessThan(5_000);
        expect(err).toBeInstanceOf(S3DriverError);
        expect((err as S3DriverError).code).toBe("Timeout");
        expect((err as Error).message).toMatch(/GetObject "t\/k": Timeout/);
        // All at once (one time limit for the lot); each settles into its error at once.
        const calls: [string, Promise<unknown>][] = [
          ["HeadObject", d.stat("/k")],
          ["ListObjectsV2", d.list("/k")],
          ["PutObject", d.putContent("/k", Buffer.from("x"))],
          ["GetObject", d.reader("/k", 1, 2)],
          ["GetObject", d.writer("/k", false)],
          ["HeadObject", d.delete("/k")],
        ].map(([op, p]) => [op as string, (p as Promise<unknown>).catch((x: unknown) => x)]);
        for (const [op, p] of calls) {
          const e = await p;
          expect(e, op).toBeInstanceOf(S3DriverError);
          expect((e as S3DriverError).code, op).toBe("Timeout");
          expect((e as S3DriverError).operation, op).toBe(op);
        }
      } finally {
        await d.close();
      }
    });
  });

  it("options: chunksize from 5 MiB, no signature v2, config keys as config.yaml spells them", () => {
    expect(() => new S3Driver({ ...s3DriverOptions("/"), chunkSize: 5 * MiB - 1 })).toThrow(/chunksize/);
    expect(() => new S3Driver({ ...s3DriverOptions("/"), v4auth: false })).toThrow(/v4auth/);
    expect(() => new S3Driver({ ...s3DriverOptions("/"), secretKey: undefined })).toThrow(/secretkey/);
    expect(() => new S3Driver({ bucket: "b" })).toThrow(/region/);
    const d = S3Driver.fromConfig({
      accesskey: "AK",
      secretkey: "SK",
      region: "eu-west-1",
      regionendpoint: "127.0.0.1:9",
      bucket: "reg",
      secure: false,
      v4auth: true,
      chunksize: 6 * MiB,
      rootdirectory: "/a/b/",
    });
    expect(d.chunkSize).toBe(6 * MiB);
    expect(d.root).toBe("a/b");
    expect(d.key("/docker/registry/v2/x")).toBe("a/b/docker/registry/v2/x");
    expect(d.bucket).toBe("reg");
    void d.close();
    expect(new S3Driver({ ...s3DriverOptions(""), region: "us-east-1" }).key("/docker/x")).toBe("docker/x");
  });

  it("reader streams a multi-part object and can be abandoned midway", async () => {
    const st = await store();
    const data = pattern(11 * MiB, 91);
    const w = await st.driver.writer("/big", false);
    await w.write(data);
    await w.commit();
    const r = await st.driver.reader("/big", MiB);
    let got = 0;
    for await (const c of r) {
      got += (c as Buffer).length;
      if (got > MiB) break; // destroys the stream
    }
    expect(got).toBeGreaterThan(MiB);
    expect((await readAll(await st.driver.reader("/big", 10 * MiB - 3, 6))).equals(data.subarray(10 * MiB - 3, 10 * MiB + 3))).toBe(true);
  });
});
