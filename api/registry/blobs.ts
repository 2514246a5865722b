// Blobs: the bytes under blobs/, and whether a repository may serve them (its _layers link). A blob
// is served through a repository only when that repository links it, as distribution does, so a
// pull token for one repository never reads another's layers (docs/registry.md, "Blobs").
import type { Readable } from "node:stream";
import { PathNotFoundError, type StorageDriver } from "../../adapters/blobstore/driver.ts";
import { noJournal, type GcJournal } from "./gc-journal.ts";
import type { Links } from "../resources/registry-storage.ts";
import type { Digest } from "../resources/registry-names.ts";
import * as paths from "../resources/registry-paths.ts";

export interface BlobInfo {
  digest: Digest;
  size: number;
}

export class Blobs {
  constructor(
    private readonly driver: StorageDriver,
    private readonly links: Links,
    private readonly journal: GcJournal = noJournal,
  ) {}

  /** The blob's size when its bytes are stored; undefined otherwise (never stored, or swept). */
  async stat(d: Digest): Promise<BlobInfo | undefined> {
    try {
      const info = await this.driver.stat(paths.blobData(d));
      return info.isDir ? undefined : { digest: d, size: info.size };
    } catch (err) {
      if (err instanceof PathNotFoundError) return undefined;
      throw err;
    }
  }

  /**
   * The blob as `name` serves it: linked there and stored. A blob garbage collection moved to
   * quarantine is moved back: a request that asks for a blob its repository links may be about to
   * depend on it (docs/registry-gc.md, "Why nothing is lost").
   */
  async statInRepository(name: string, d: Digest): Promise<BlobInfo | undefined> {
    const target = await this.links.readBlobLink(name, d);
    if (target === undefined) return undefined;
    const info = (await this.stat(target)) ?? ((await this.rescue(target)) ? await this.stat(target) : undefined);
    return info === undefined ? undefined : { digest: d, size: info.size };
  }

  /**
   * Move `d` back from quarantine; false when it is not there (never was, or deleted for good).
   * Touched first, so the collector, which re-reads the touches, keeps what was moved back.
   */
  async rescue(d: Digest): Promise<boolean> {
    await this.journal.touch([d.value]);
    try {
      await this.driver.move(paths.quarantineData(d), paths.blobData(d));
      return true;
    } catch (err) {
      if (err instanceof PathNotFoundError) return false;
      throw err;
    }
  }

  /** `length` bytes from `offset` (to the end when omitted); PathNotFoundError when the bytes are gone. */
  open(d: Digest, offset = 0, length?: number): Promise<Readable> {
    return this.driver.reader(paths.blobData(d), offset, length);
  }

  getContent(d: Digest): Promise<Buffer> {
    return this.driver.getContent(paths.blobData(d));
  }

  /**
   * Store small content (a manifest) under its digest, unless it is there already: content
   * addressed, so existing bytes are the same bytes.
   */
  async putContent(d: Digest, content: Uint8Array): Promise<void> {
    if ((await this.stat(d)) !== undefined) return;
    await this.driver.putContent(paths.blobData(d), content);
  }
}

/** A satisfiable byte range of a blob: `start` to `end` inclusive. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * The `Range: bytes=...` of a blob GET against the blob's size (RFC 9110 14.2, as Go's
 * http.ServeContent reads it): a single range gives the bytes to send; "unsatisfiable" asks for a
 * 416 (a start at or past the end, or an end before the start); undefined means serve the whole
 * blob (no header, another unit, several ranges: a plain 200 is always allowed). An empty blob has
 * no bytes to select: any well-formed range gets the whole (empty) blob with a 200, as from Go's
 * ServeContent (some clients send a Range with every request).
 */
export function parseRange(header: string | undefined, size: number): ByteRange | "unsatisfiable" | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return /^\s*bytes\s*=/i.test(header) && !header.includes(",") ? "unsatisfiable" : undefined;
  const [, first = "", last = ""] = m;
  if (first === "" && last === "") return "unsatisfiable";
  if (size === 0) return undefined;
  if (first === "") {
    // A suffix: the last `last` bytes.
    const n = Number(last);
    if (n === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  if (start >= size) return "unsatisfiable";
  if (last === "") return { start, end: size - 1 };
  const end = Number(last);
  if (end < start) return "unsatisfiable";
  return { start, end: Math.min(end, size - 1) };
}
