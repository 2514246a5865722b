// Reading a JSON request body: the content type must say JSON, the body must be at most 1 MiB of
// UTF-8, and it must parse. Every failure is a 400 naming the problem (docs/api-reference.md,
// "Bodies": bad input is a 400, a too-large body included, so clients handle one error shape).
//
// Why the content type is checked and not sniffed: the original system read a form-encoded body as
// a form and then failed on "EOF"; refusing the wrong type up front says what is wrong instead.
import { IncomingMessage } from "node:http";
import type { Context } from "hono";
import type { z } from "zod";
import { badRequest } from "./errors.ts";
import { parseWith } from "./validation.ts";

export const maxJsonBodyBytes = 1 << 20;

const jsonMediaType = /^application\/([a-z0-9.+-]+\+)?json$/;

export interface ReadJsonOptions {
  /** Largest accepted body in bytes (default 1 MiB). */
  limitBytes?: number;
}

function describeLimit(bytes: number): string {
  return bytes % (1 << 20) === 0 ? `${bytes / (1 << 20)} MiB` : `${bytes} bytes`;
}

/** The request's JSON body, parsed but not validated; a 400 ApiError on any problem. */
export async function readJson(c: Context, options: ReadJsonOptions = {}): Promise<unknown> {
  const limit = options.limitBytes ?? maxJsonBodyBytes;
  const contentType = c.req.header("content-type");
  const mediaType = contentType?.split(";")[0]?.trim().toLowerCase() ?? "";
  if (!jsonMediaType.test(mediaType)) {
    const got = contentType ? `got ${JSON.stringify(contentType)}` : "got none";
    throw badRequest(`content-type must be application/json (${got})`, [{ path: "content-type", message: `must be application/json, ${got}` }]);
  }
  const encoding = c.req.header("content-encoding")?.trim().toLowerCase();
  if (encoding && encoding !== "identity") {
    throw badRequest(`content-encoding ${encoding} is not supported; send the body uncompressed`, [
      { path: "content-encoding", message: "not supported" },
    ]);
  }
  const bytes = await readBodyBytes(c, limit);
  if (bytes.length === 0) throw badRequest("request body is empty; expected JSON", [{ path: "body", message: "is empty" }]);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("request body is not valid UTF-8", [{ path: "body", message: "not valid UTF-8" }]);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    throw badRequest(`malformed JSON: ${reason}`, [{ path: "body", message: `malformed JSON: ${reason}` }]);
  }
}

/** The raw request body, at most `limit` bytes (a 400 naming the limit beyond, the rest unread). */
export async function readBodyBytes(c: Context, limit: number): Promise<Uint8Array> {
  const tooLarge = () =>
    badRequest(`request body exceeds ${describeLimit(limit)}`, [{ path: "body", message: `larger than ${limit} bytes` }]);
  // A declared length over the limit is refused before reading a byte.
  const declared = Number(c.req.header("content-length") ?? NaN);
  if (declared > limit) throw tooLarge();
  const incoming = nodeRequestOf(c);
  return incoming ? readIncoming(incoming, limit, tooLarge) : readLimited(c.req.raw.body, limit, tooLarge);
}

/** Read and validate a JSON body with `schema`; `what` names it in messages ("PodGroupSpec"). */
export async function readJsonBody<S extends z.ZodType>(c: Context, schema: S, what: string, options?: ReadJsonOptions): Promise<z.output<S>> {
  return parseWith(schema, await readJson(c, options), what);
}

/**
 * Under @hono/node-server the Node request the body can be read from directly (c.env.incoming),
 * when nothing has read from it yet. Reading it directly skips building a WHATWG Request and a web
 * stream around it for every body, which profiling showed to cost more than parsing the JSON.
 * Elsewhere (app.request() in tests, other runtimes): undefined, and the web stream is read.
 */
function nodeRequestOf(c: Context): IncomingMessage | undefined {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  return incoming instanceof IncomingMessage && !incoming.readableDidRead ? incoming : undefined;
}

/**
 * readLimited for a Node request: the whole body, or `tooLarge()` as soon as it passes `limit`. The
 * rest is then left unread (paused, nothing more buffered here), as with the web stream: once the
 * 400 is sent, @hono/node-server drains a small remainder for keep-alive or closes the connection.
 */
function readIncoming(incoming: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error?: Error) => {
      incoming.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
      if (error) reject(error);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) {
        finish(tooLarge());
        incoming.pause();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish();
    const onError = (error: Error) => finish(error);
    // A client that goes away mid-body: 'close' without 'end' (an 'error' may not come).
    const onClose = () => finish(new Error("the client closed the connection before sending the whole body"));
    incoming.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose);
  });
}

/** The whole stream, or `tooLarge()` thrown as soon as it passes `limit` (the rest is not read). */
async function readLimited(body: ReadableStream<Uint8Array> | null, limit: number, tooLarge: () => Error): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
