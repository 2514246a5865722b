// Backups of a store in one portable format (docs/backup.md): every key under a prefix at one
// revision, as JSON lines, whichever store it came from, so an etcd backup restores into SQLite and
// back. A consistent range read at one revision (paged, every page after the first at the first's
// revision) is a snapshot on both stores; keys attached to a lease (leader keys) belong to live
// processes and are left out. Restoring writes ordinary transactions (applyRestore), so watchers see
// puts and deletes at new revisions and nothing has to relist.
//
// The file: a header line, one line per key, a trailer with the count and a SHA-256 of every line
// before it, so a truncated or edited file is refused rather than restored in part:
//   {"format":"capstan-backup","version":1,"prefix":"/platform/","revision":R,"source":"etcd://...","createdAt":"..."}
//   {"key":"/platform/orchestrator/podgroups/web","value":"{...}"}
//   {"end":true,"keys":N,"sha256":"..."}
import { createHash } from "node:crypto";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { CompactedError } from "./errors.ts";
import type { Compare, Op, Store } from "./store.ts";

export const backupFormat = "capstan-backup";
export const backupVersion = 1;

export interface BackupHeader {
  format: typeof backupFormat;
  version: number;
  /** Every key under this prefix was read. */
  prefix: string;
  /** The store revision all keys were read at. */
  revision: number;
  /** The store it came from (its description: never a password). */
  source: string;
  createdAt: string;
}

export interface Backup {
  header: BackupHeader;
  /** Key -> value, in key order. */
  entries: Map<string, string>;
}

/** A file that is not a whole backup of this format. */
export class BackupFormatError extends Error {
  override readonly name = "BackupFormatError";
  constructor(file: string, reason: string) {
    super(`${file} is not a usable Capstan backup: ${reason}`);
  }
}

/** The store compacted the revision a backup was being read at (a big store read while compaction runs). */
export class BackupCompactedError extends Error {
  override readonly name = "BackupCompactedError";
  constructor(
    readonly revision: number,
    readonly compactRevision: number,
  ) {
    super(
      `the store was compacted to revision ${compactRevision} while the backup was being read at revision ${revision}: ` +
        "nothing was written; run it again (a store this big may need a longer -history on the platform)",
    );
  }
}

const pageSize = 1000;

/**
 * Read every key under `prefix` at one revision (leased keys left out) and write it to `file` (mode
 * 0600: it holds the registry token signer's private key, specs with their env, webhook URLs and
 * the secrets' ciphertext: docs/backup.md), through a temporary file renamed into
 * place, so a backup that fails half-way leaves no file that looks whole. `file` "-" writes to
 * standard output.
 */
export async function writeBackup(store: Store, prefix: string, file: string): Promise<{ header: BackupHeader; keys: number; bytes: number }> {
  if (!prefix.endsWith("/")) throw new TypeError(`backup prefix ${JSON.stringify(prefix)} must end with "/"`);
  const lines: string[] = [];
  let revision: number | undefined;
  let startAfter: string | undefined;
  for (;;) {
    let page;
    try {
      page = await store.list(prefix, { limit: pageSize, ...(revision !== undefined && { revision }), ...(startAfter !== undefined && { startAfter }) });
    } catch (e) {
      // The store compacted past the first page's revision while paging: no snapshot to finish.
      if (e instanceof CompactedError) throw new BackupCompactedError(revision ?? e.requestedRevision ?? 0, e.compactRevision);
      throw e;
    }
    revision ??= page.revision;
    for (const kv of page.items) if (kv.lease === undefined) lines.push(JSON.stringify({ key: kv.key, value: kv.value }));
    const last = page.items.at(-1);
    if (!page.more || last === undefined) break;
    startAfter = last.key;
  }
  const header: BackupHeader = { format: backupFormat, version: backupVersion, prefix, revision: revision!, source: store.description, createdAt: new Date().toISOString() };
  const hash = createHash("sha256");
  const body = [JSON.stringify(header), ...lines].map((l) => `${l}\n`).join("");
  hash.update(body);
  const text = body + JSON.stringify({ end: true, keys: lines.length, sha256: hash.digest("hex") }) + "\n";
  if (file === "-") {
    await new Promise<void>((resolve, reject) => process.stdout.write(text, (e) => (e ? reject(e) : resolve())));
  } else {
    const tmp = `${file}.tmp-${process.pid}`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } catch (e) {
      closeSync(fd);
      unlinkSync(tmp);
      throw e;
    }
    closeSync(fd);
    renameSync(tmp, file);
  }
  return { header, keys: lines.length, bytes: Buffer.byteLength(text) };
}

/** Read and check a backup file ("-": standard input): its format, version, key count and checksum. */
export function readBackup(file: string): Backup {
  let text: string;
  try {
    text = readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (e) {
    throw new BackupFormatError(file === "-" ? "standard input" : file, `cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return parseBackup(text, file === "-" ? "standard input" : file);
}

/** Check a backup's text (`file` names it in errors). */
export function parseBackup(text: string, file: string): Backup {
  // Every line ends with a newline: a last line without one was cut in the middle.
  if (text !== "" && !text.endsWith("\n")) throw new BackupFormatError(file, "its last line is incomplete: the file was cut short");
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  if (lines.length < 2) throw new BackupFormatError(file, "it has no header and trailer: the file is empty or was cut short");
  const parse = (line: string, n: number): Record<string, unknown> => {
    try {
      const v = JSON.parse(line) as unknown;
      if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // below
    }
    throw new BackupFormatError(file, `line ${n} is not a JSON object`);
  };
  const header = parse(lines[0]!, 1);
  if (header.format !== backupFormat) throw new BackupFormatError(file, `format ${JSON.stringify(header.format)}, expected ${JSON.stringify(backupFormat)}`);
  if (header.version !== backupVersion) throw new BackupFormatError(file, `version ${String(header.version)}; this Capstan reads version ${backupVersion}`);
  if (typeof header.prefix !== "string" || typeof header.revision !== "number") throw new BackupFormatError(file, "the header lacks prefix or revision");
  const trailer = parse(lines.at(-1)!, lines.length);
  if (trailer.end !== true) throw new BackupFormatError(file, "it has no trailer: the file was cut short");
  const hash = createHash("sha256");
  for (const line of lines.slice(0, -1)) hash.update(`${line}\n`);
  if (trailer.sha256 !== hash.digest("hex")) throw new BackupFormatError(file, "its checksum does not match: the file was changed or damaged");
  const entries = new Map<string, string>();
  for (let i = 1; i < lines.length - 1; i++) {
    const kv = parse(lines[i]!, i + 1);
    if (typeof kv.key !== "string" || typeof kv.value !== "string") throw new BackupFormatError(file, `line ${i + 1} lacks key or value`);
    if (!kv.key.startsWith(header.prefix)) throw new BackupFormatError(file, `line ${i + 1}: key ${kv.key} is outside the prefix ${header.prefix}`);
    entries.set(kv.key, kv.value);
  }
  if (trailer.keys !== entries.size) throw new BackupFormatError(file, `the trailer counts ${String(trailer.keys)} keys, the file holds ${entries.size}`);
  return { header: header as unknown as BackupHeader, entries };
}

export interface ApplyLimits {
  /** Ops per transaction (etcd's --max-txn-ops is 128 by default). Infinity: one transaction. */
  maxOps: number;
  /** Bytes of keys and values per transaction (etcd's --max-request-bytes is 1.5 MiB). */
  maxBytes: number;
}

/** Within etcd's defaults; an embedded store takes the whole restore in one transaction. */
export const etcdApplyLimits: ApplyLimits = { maxOps: 64, maxBytes: 1 << 20 };
export const oneTransaction: ApplyLimits = { maxOps: Infinity, maxBytes: Infinity };

/** A key changed between reading the store and writing the restore: nothing of that transaction was written. */
export class RestoreConflictError extends Error {
  override readonly name = "RestoreConflictError";
  constructor(readonly transactions: number) {
    super("the store changed during the restore");
  }
}

/**
 * Write `units` (each a list of ops that belong together, e.g. a group's spec and status) as
 * transactions, packing whole units up to the limits (a unit over them is split). Each transaction
 * holds only if every key it writes is still at its `expected` modRevision (0: absent; a key not in
 * `expected` is expected absent); else RestoreConflictError, after the transactions before it.
 * Answers how many transactions ran and the last revision.
 */
export async function applyRestore(
  store: Store,
  units: Op[][],
  limits: ApplyLimits,
  expected: ReadonlyMap<string, number>,
): Promise<{ transactions: number; revision: number | undefined }> {
  let batch: Op[] = [];
  let bytes = 0;
  let transactions = 0;
  let revision: number | undefined;
  const flush = async () => {
    if (batch.length === 0) return;
    const compares: Compare[] = batch.flatMap((op) => (op.type === "deletePrefix" ? [] : [{ key: op.key, target: "modRevision" as const, equals: expected.get(op.key) ?? 0 }]));
    const result = await store.txn(compares, batch);
    if (!result.succeeded) throw new RestoreConflictError(transactions);
    revision = result.revision;
    transactions++;
    batch = [];
    bytes = 0;
  };
  // A key counts twice: its op and its compare.
  const sizeOf = (op: Op) => (op.type === "deletePrefix" ? Buffer.byteLength(op.prefix) : 2 * Buffer.byteLength(op.key)) + (op.type === "put" ? Buffer.byteLength(op.value) : 0);
  for (const unit of units) {
    const unitBytes = unit.reduce((n, op) => n + sizeOf(op), 0);
    if (batch.length > 0 && (batch.length + unit.length > limits.maxOps || bytes + unitBytes > limits.maxBytes)) await flush();
    for (const op of unit) {
      if (batch.length > 0 && (batch.length + 1 > limits.maxOps || bytes + sizeOf(op) > limits.maxBytes)) await flush();
      batch.push(op);
      bytes += sizeOf(op);
    }
  }
  await flush();
  return { transactions, revision };
}
