// A source file that cannot be read fails the build as a BuildError naming it (the command prints
// one line), not as a stack trace. The read is made to fail (tests run as root: modes do not).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as FsPromises from "node:fs/promises";
import { describe, expect, it, vi } from "vitest";

vi.mock("node:fs/promises", async (original) => {
  const fs = await original<typeof FsPromises>();
  return {
    ...fs,
    readFile: (async (path: string, ...rest: unknown[]) => {
      if (String(path).endsWith("unreadable.txt")) throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
      return (fs.readFile as (...a: unknown[]) => Promise<unknown>)(path, ...rest);
    }) as typeof fs.readFile,
  };
});

const { archiveSource } = await import("../../../adapters/build/source.ts");
const { BuildError } = await import("../../../adapters/build/plan.ts");

describe("the source archive", () => {
  it("reports a file it cannot read as a BuildError naming the path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-src-"));
    try {
      writeFileSync(join(dir, "ok.txt"), "x");
      writeFileSync(join(dir, "unreadable.txt"), "x");
      const e = await archiveSource(dir, "p").catch((err: unknown) => err);
      expect(e).toBeInstanceOf(BuildError);
      expect((e as Error).message).toBe(`source: cannot read ${join(dir, "unreadable.txt")}: EIO`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
