import { Readable } from "node:stream";
import { extract, type Header } from "tar-stream";
import { describe, expect, it } from "vitest";
import { ArchiveInputError, buildTar } from "../../../adapters/cluster/archive.ts";

async function entries(tar: Buffer): Promise<{ header: Header; body: string }[]> {
  const out: { header: Header; body: string }[] = [];
  const x = extract();
  x.on("entry", (header, stream, next) => {
    const parts: Buffer[] = [];
    stream.on("data", (b: unknown) => {
      parts.push(b as Buffer);
    });
    stream.on("end", () => {
      out.push({ header, body: Buffer.concat(parts).toString("utf8") });
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    x.on("finish", () => resolve());
    x.on("error", reject);
    Readable.from([tar]).pipe(x);
  });
  return out;
}

describe("buildTar", () => {
  it("writes regular files relative to / with the given mode and owner, and no directory entries", async () => {
    const tar = await buildTar([
      { path: "/platform/app/conf/a.yaml", content: "héllo\n", mode: 0o440, uid: 0, gid: 0 },
      { path: "/etc/b", content: Buffer.from([0, 1, 2]), mode: 0o400, uid: 7, gid: 8 },
    ]);
    const got = await entries(tar);
    expect(got.map((e) => [e.header.name, e.header.type, e.header.mode, e.header.uid, e.header.gid, e.header.size])).toEqual([
      ["platform/app/conf/a.yaml", "file", 0o440, 0, 0, Buffer.byteLength("héllo\n")],
      ["etc/b", "file", 0o400, 7, 8, 3],
    ]);
    expect(got[0]!.body).toBe("héllo\n");
  });

  it("handles a path longer than the ustar name field", async () => {
    const long = `/platform/app/${"d".repeat(120)}/${"f".repeat(80)}.txt`;
    const got = await entries(await buildTar([{ path: long, content: "x", mode: 0o400, uid: 0, gid: 0 }]));
    expect(got[0]!.header.name).toBe(long.slice(1));
  });

  it.each([
    ["relative", { path: "a", mode: 0o400 }],
    ["a directory", { path: "/etc/", mode: 0o400 }],
    ["not normalised", { path: "/a/../etc/passwd", mode: 0o400 }],
    ["a bad mode", { path: "/a", mode: 0o10000 }],
  ])("refuses %s", async (_what, f) => {
    await expect(buildTar([{ content: "x", uid: 0, gid: 0, ...f }])).rejects.toBeInstanceOf(ArchiveInputError);
  });

  it("refuses a path listed twice", async () => {
    const f = { path: "/a", content: "x", mode: 0o400, uid: 0, gid: 0 };
    await expect(buildTar([f, f])).rejects.toThrow(/listed twice/);
  });
});
