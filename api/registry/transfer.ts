// Request bodies as streams, and the chunk headers of uploads (docs/registry.md, "Uploads"). A
// layer is never held whole in memory: the body is read chunk by chunk from the Node request (or
// the WHATWG stream elsewhere, e.g. app.request() in tests) straight into the storage writer.
import { IncomingMessage } from "node:http";
import type { Context } from "hono";
import { registryError } from "./errors.ts";
import type { ChunkRange } from "./uploads.ts";

const empty: AsyncIterable<Uint8Array> = { [Symbol.asyncIterator]: async function* () {} };

/**
 * The request body as an async iterable of chunks. Under @hono/node-server the Node request is read
 * directly when nothing has read from it yet (as api/http/body.ts does), which skips the WHATWG
 * stream wrapped around it.
 */
export function requestBody(c: Context): AsyncIterable<Uint8Array> {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  if (incoming instanceof IncomingMessage && !incoming.readableDidRead) return incoming;
  const body = c.req.raw.body;
  return body === null ? empty : (body as unknown as AsyncIterable<Uint8Array>);
}

/**
 * The whole body when it is at most `limit` bytes (a manifest); `tooLarge()` is thrown as soon as
 * the declared or the received length passes it, the rest left unread.
 */
export async function readBodyUpTo(c: Context, limit: number, tooLarge: (size: number) => Error): Promise<Buffer> {
  const declared = Number(c.req.header("content-length") ?? NaN);
  if (declared > limit) throw tooLarge(declared);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of requestBody(c)) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(size);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(chunks, size);
}

/**
 * A chunk's `Content-Range`: `<start>-<end>` as the OCI spec writes it; the `bytes ` / `bytes=`
 * prefix and `/<total>` suffix some clients add are tolerated. Absent: undefined. Anything else, or
 * an end before the start: 416 RANGE_INVALID.
 */
export function parseContentRange(header: string | undefined): ChunkRange | undefined {
  if (header === undefined || header.trim() === "") return undefined;
  const m = /^\s*(?:bytes[ =])?\s*(\d{1,15})-(\d{1,15})(?:\/(?:\d{1,15}|\*))?\s*$/i.exec(header);
  if (!m || Number(m[2]) < Number(m[1])) {
    throw registryError("RANGE_INVALID", { contentRange: header }, `invalid Content-Range ${JSON.stringify(header)}: expected <start>-<end>`);
  }
  return { start: Number(m[1]), end: Number(m[2]) };
}

/** A declared Content-Length that disagrees with the Content-Range: 400 SIZE_INVALID before anything is written. */
export function checkDeclaredLength(c: Context, range: ChunkRange | undefined): void {
  const declared = c.req.header("content-length");
  if (range === undefined || declared === undefined) return;
  if (Number(declared) !== range.end - range.start + 1) {
    throw registryError("SIZE_INVALID", { contentLength: declared, contentRange: `${range.start}-${range.end}` }, `Content-Length ${declared} does not match Content-Range ${range.start}-${range.end}`);
  }
}
