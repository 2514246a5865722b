// Image pulls: the reference an engine is asked for, and the engine's progress stream read into a
// PullProgress. POST /images/create answers 200 and then streams one JSON object per line:
//
//   {"status":"Pulling from shop/web","id":"v1"}
//   {"status":"Pulling fs layer","progressDetail":{},"id":"a1b2"}
//   {"status":"Downloading","progressDetail":{"current":1024,"total":4096},"id":"a1b2"}
//   {"status":"Download complete","id":"a1b2"}   {"status":"Extracting",...}   {"status":"Pull complete","id":"a1b2"}
//   {"status":"Already exists","id":"c3d4"}
//   {"status":"Status: Downloaded newer image for ..."}
//   {"error":"...","errorDetail":{"message":"..."}}   a failure after the 200: the pull failed
//
// The stream is read with the byte-safe line splitter (ndjson.ts) rather than docker-modem's
// followProgress, whose JSON.parse of a bad line throws out of the stream's data handler.
import type { Readable } from "node:stream";
import type { PullProgress } from "./cluster.ts";
import { LineSplitter } from "./ndjson.ts";

/**
 * The engine's fromImage and tag for `image`: "repo:tag", "repo@sha256:..." or "repo" (tag
 * "latest": an empty tag would make the engine pull every tag of the repository).
 */
export function pullReference(image: string): { fromImage: string; tag: string } {
  const at = image.indexOf("@");
  if (at >= 0) return { fromImage: image.slice(0, at), tag: image.slice(at + 1) };
  const colon = image.lastIndexOf(":");
  // A colon before the last "/" is a registry's port ("127.0.0.1:5000/shop/web"), not a tag.
  if (colon > image.lastIndexOf("/")) return { fromImage: image.slice(0, colon), tag: image.slice(colon + 1) };
  return { fromImage: image, tag: "latest" };
}

interface PullLine {
  status?: unknown;
  id?: unknown;
  progressDetail?: { current?: unknown; total?: unknown } | null;
  error?: unknown;
  errorDetail?: { message?: unknown } | null;
}

interface Layer {
  current: number;
  total: number;
  done: boolean;
}

const layerStatuses = /^(Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting|Pull complete|Already exists|Retrying)/;

/** Sums the layers of a pull's progress lines. */
export class PullTracker {
  private readonly layers = new Map<string, Layer>();
  private status = "";
  /** The engine's error line, when one came. */
  error: string | undefined;

  /** Takes one parsed line; returns the progress after it (undefined for a line that is not progress). */
  feed(line: PullLine): PullProgress | undefined {
    if (line.error !== undefined || line.errorDetail?.message !== undefined) {
      const m = line.errorDetail?.message ?? line.error;
      this.error = typeof m === "string" && m !== "" ? m : "the engine reported a failed pull";
      return undefined;
    }
    if (typeof line.status !== "string") return undefined;
    this.status = line.status;
    const id = typeof line.id === "string" ? line.id : undefined;
    if (id !== undefined && layerStatuses.test(line.status)) {
      const layer = this.layers.get(id) ?? { current: 0, total: 0, done: false };
      this.layers.set(id, layer);
      const cur = line.progressDetail?.current;
      const tot = line.progressDetail?.total;
      if (line.status.startsWith("Downloading") && typeof cur === "number" && typeof tot === "number" && tot > 0) {
        layer.current = Math.min(cur, tot);
        layer.total = tot;
      } else if (line.status.startsWith("Download complete") || line.status.startsWith("Verifying Checksum")) {
        layer.current = layer.total;
      } else if (line.status.startsWith("Pull complete")) {
        layer.current = layer.total;
        layer.done = true;
      } else if (line.status.startsWith("Already exists")) {
        layer.done = true;
      }
    }
    return this.progress();
  }

  progress(): PullProgress {
    let currentBytes = 0;
    let totalBytes = 0;
    let layersDone = 0;
    for (const l of this.layers.values()) {
      currentBytes += l.current;
      totalBytes += l.total;
      if (l.done) layersDone++;
    }
    return { currentBytes, totalBytes, layers: this.layers.size, layersDone, status: this.status };
  }
}

/**
 * Reads a pull's stream to its end. Resolves when the engine finished without an error line;
 * rejects with `onError(message)` for an error line, with the signal's reason when the stream was
 * cut by an abort, and with an ECONNRESET error when the engine closed it early.
 */
export function followPull(
  stream: Readable,
  signal: AbortSignal,
  tracker: PullTracker,
  onProgress: ((p: PullProgress) => void) | undefined,
  onError: (message: string) => Error,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const lines = new LineSplitter();
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      stream.removeListener("data", onData);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onData = (chunk: Buffer | string) => {
      for (const text of lines.push(chunk)) {
        let line: PullLine;
        try {
          line = JSON.parse(text) as PullLine;
        } catch {
          continue; // not a progress line; never fatal
        }
        if (typeof line !== "object" || line === null) continue;
        const p = tracker.feed(line);
        if (tracker.error !== undefined) {
          settle(onError(tracker.error));
          stream.destroy();
          return;
        }
        if (p !== undefined && onProgress !== undefined) {
          try {
            onProgress(p);
          } catch {
            // a progress listener's failure is not the pull's
          }
        }
      }
    };
    stream.on("data", onData);
    stream.once("end", () => settle());
    stream.once("error", (e) => settle(signal.aborted ? signal.reason : e));
    stream.once("close", () => {
      if (signal.aborted) settle(signal.reason);
      else settle(Object.assign(new Error("the engine closed the pull's progress stream before the pull finished"), { code: "ECONNRESET" }));
    });
  });
}
