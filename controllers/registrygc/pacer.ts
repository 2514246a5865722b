// Garbage collection yields to the registry's requests (docs/registry-gc.md, "Pacing"): it runs in
// the serving process, on the same event loop and I/O threads, so a run at full speed takes from
// pushes and pulls what it uses. While requests are arriving, the collector works in slices of
// `workMs` and rests `restMs` after each; on an idle registry it runs at full speed.
import type { FileInfo, FileWriter, StorageDriver } from "../../adapters/blobstore/driver.ts";
import type { Readable } from "node:stream";

/** Requests seen by the registry API: the collector rests while this keeps moving. */
export class RequestActivity {
  private count = 0;
  /** Called once per request (the API's middleware). */
  seen(): void {
    this.count++;
  }
  get total(): number {
    return this.count;
  }
}

export interface PacerOptions {
  activity: RequestActivity;
  /** Work between rests while busy (default 10 ms). */
  workMs?: number;
  /** Rest after each slice while busy (default 30 ms: at most a quarter of the time). */
  restMs?: number;
}

export class Pacer {
  private sliceStart = performance.now();
  private seenAtSlice: number;
  private readonly workMs: number;
  private readonly restMs: number;

  constructor(private readonly o: PacerOptions) {
    this.workMs = o.workMs ?? 10;
    this.restMs = o.restMs ?? 30;
    this.seenAtSlice = o.activity.total;
  }

  /** Before each unit of work: rests when the slice is used up and requests arrived during it. */
  async pace(signal?: AbortSignal): Promise<void> {
    const now = performance.now();
    if (now - this.sliceStart < this.workMs) return;
    const busy = this.o.activity.total !== this.seenAtSlice;
    if (busy) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const t = setTimeout(done, this.restMs);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
    this.sliceStart = performance.now();
    this.seenAtSlice = this.o.activity.total;
  }
}

/** `driver` with every call paced: what the collector uses inside a serving registry. */
export function pacedDriver(driver: StorageDriver, pacer: Pacer, signal?: AbortSignal): StorageDriver {
  const p = () => pacer.pace(signal);
  return {
    name: driver.name,
    singleProcess: driver.singleProcess,
    getContent: async (path: string): Promise<Buffer> => (await p(), driver.getContent(path)),
    putContent: async (path: string, content: Uint8Array): Promise<void> => (await p(), driver.putContent(path, content)),
    reader: async (path: string, offset?: number, length?: number): Promise<Readable> => (await p(), driver.reader(path, offset, length)),
    writer: async (path: string, append: boolean): Promise<FileWriter> => (await p(), driver.writer(path, append)),
    stat: async (path: string): Promise<FileInfo> => (await p(), driver.stat(path)),
    list: async (path: string): Promise<string[]> => (await p(), driver.list(path)),
    move: async (source: string, dest: string): Promise<void> => (await p(), driver.move(source, dest)),
    delete: async (path: string): Promise<void> => (await p(), driver.delete(path)),
    deleteMany: async (paths: readonly string[]): Promise<void> => (await p(), driver.deleteMany(paths)),
    close: () => driver.close(),
  };
}
