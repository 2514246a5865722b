// Garbage collection yields to the registry's requests (docs/registry-gc.md, "Pacing"): it runs in
// the serving process, on the same event loop and I/O threads, so a run at full speed takes from
// pushes and pulls what it uses. While requests are arriving, the collector works in slices of
// `workMs`, rests `restMs` after each, and makes at most `busyConcurrency` storage calls at once;
// on an idle registry it runs at full speed.
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
  /** Rest after each slice while busy (default 50 ms: at most a sixth of the time). */
  restMs?: number;
  /** Storage calls at once while busy (default 2). */
  busyConcurrency?: number;
}

export class Pacer {
  private sliceStart = performance.now();
  private seenAtSlice: number;
  private readonly workMs: number;
  private readonly restMs: number;
  /** Requests arrived during the last slice: calls are also limited to `busyConcurrency` at once. */
  private busy = false;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly o: PacerOptions) {
    this.workMs = o.workMs ?? 10;
    this.restMs = o.restMs ?? 50;
    this.seenAtSlice = o.activity.total;
  }

  /** Run `call` paced: one of at most `busyConcurrency` at once while requests arrive. */
  async run<T>(call: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.pace(signal);
    while (this.busy && this.inFlight >= (this.o.busyConcurrency ?? 2)) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.inFlight++;
    try {
      return await call();
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  /** Before each unit of work: rests when the slice is used up and requests arrived during it. */
  async pace(signal?: AbortSignal): Promise<void> {
    const now = performance.now();
    if (now - this.sliceStart < this.workMs) return;
    const busy = this.o.activity.total !== this.seenAtSlice;
    this.busy = busy;
    if (!busy) for (let w = this.waiting.shift(); w !== undefined; w = this.waiting.shift()) w();
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
  const run = <T>(call: () => Promise<T>) => pacer.run(call, signal);
  return {
    name: driver.name,
    singleProcess: driver.singleProcess,
    getContent: (path: string): Promise<Buffer> => run(() => driver.getContent(path)),
    putContent: (path: string, content: Uint8Array): Promise<void> => run(() => driver.putContent(path, content)),
    reader: (path: string, offset?: number, length?: number): Promise<Readable> => run(() => driver.reader(path, offset, length)),
    writer: (path: string, append: boolean): Promise<FileWriter> => run(() => driver.writer(path, append)),
    stat: (path: string): Promise<FileInfo> => run(() => driver.stat(path)),
    list: (path: string): Promise<string[]> => run(() => driver.list(path)),
    move: (source: string, dest: string): Promise<void> => run(() => driver.move(source, dest)),
    delete: (path: string): Promise<void> => run(() => driver.delete(path)),
    deleteMany: (paths: readonly string[]): Promise<void> => run(() => driver.deleteMany(paths)),
    close: () => driver.close(),
  };
}
