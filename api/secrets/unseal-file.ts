// The unseal key file (docs/secrets.md, "Auto-unseal"): the key shares themselves, kept on disk
// for a service that unseals itself at start. Whoever reads the file (with the store, or any copy
// of it) reads every secret: the file must be private to the user running the service (mode 0600
// or stricter, owned by that user), and a service refuses to start on one that is not.
//
// Format: text, one base64 key share per line, as `capstan secrets init` prints them; blank lines
// and lines starting with `#` are ignored. So an operator can write it from the printed shares:
//   printf '%s\n' KEY1 KEY2 KEY3 > FILE   (with umask 077, or chmod 600 FILE after)
import { randomBytes } from "node:crypto";
import { closeSync, constants, fstatSync, fsyncSync, linkSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, type Stats } from "node:fs";
import { basename, dirname, join } from "node:path";

/** A file that may not be used: absent, unreadable, too open, someone else's, or with no share. */
export class UnsealFileError extends Error {
  override readonly name = "UnsealFileError";
}

/**
 * Why a file of this mode and owner may not hold unseal material, or undefined when it may: no
 * permission bit for group or others, owned by `uid` (the running user). Pure.
 */
export function unsealFileProblem(file: string, stat: Pick<Stats, "mode" | "uid" | "isFile">, uid: number | undefined): string | undefined {
  if (!stat.isFile()) return `unseal key file ${file} is not a regular file`;
  const mode = stat.mode & 0o7777;
  if ((mode & 0o077) !== 0) return `unseal key file ${file} has mode ${octal(mode)}: it must be 0600 or stricter (chmod 600 ${file})`;
  if (uid !== undefined && stat.uid !== uid) return `unseal key file ${file} (mode ${octal(mode)}) is owned by uid ${stat.uid}, not by the user running capstan (uid ${uid})`;
  return undefined;
}

const octal = (mode: number) => `0${mode.toString(8).padStart(3, "0")}`;

/** The file's text for these shares. */
export function formatUnsealFile(keys: readonly string[]): string {
  return `# capstan unseal key shares: whoever reads this file and the store reads every secret\n${keys.join("\n")}\n`;
}

/** The shares in the file's text; throws UnsealFileError naming the file when there are none or a line is not base64. Pure. */
export function parseUnsealFile(file: string, text: string): string[] {
  const keys: string[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    // The line number only, never the line: it is key material.
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(line)) throw new UnsealFileError(`unseal key file ${file}: line ${i + 1} is not a base64 key share`);
    keys.push(line);
  }
  if (keys.length === 0) throw new UnsealFileError(`unseal key file ${file} holds no key share`);
  return keys;
}

/** undefined when the file does not exist; else its shares, after the mode and owner check. */
export function readUnsealFile(file: string): string[] | undefined {
  let fd: number;
  try {
    // Non-blocking: a FIFO put in its place must not hang the start (fstat then refuses it).
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new UnsealFileError(`unseal key file ${file}: ${(e as Error).message}`);
  }
  try {
    // The check is on the open file, so what is read is what was checked.
    const problem = unsealFileProblem(file, fstatSync(fd), process.getuid?.());
    if (problem !== undefined) throw new UnsealFileError(problem);
    return parseUnsealFile(file, readFileSync(fd, "utf8"));
  } finally {
    closeSync(fd);
  }
}

/**
 * Write the shares to `file`, atomically and private from the first byte: a new file of mode 0600
 * beside it, synced, then put in place and the directory synced. A crash leaves either no file or
 * the whole one, and once this returns the file survives a power loss (the store's init, which
 * comes after, must never outlive the only copy of its key). With `exclusive`, an existing `file`
 * is left alone and the write fails with EEXIST: another process is initializing with it.
 */
export function writeUnsealFile(file: string, keys: readonly string[], options: { exclusive?: boolean } = {}): void {
  writePrivateFile(file, formatUnsealFile(keys), options);
}

/** The same atomic 0600 write, for other material kept beside the shares (the root token). */
export function writePrivateFile(file: string, text: string, options: { exclusive?: boolean } = {}): void {
  const tmp = join(dirname(file), `.${basename(file)}.${randomBytes(4).toString("hex")}.tmp`);
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeFileSync(fd, text); // loops until every byte is written
    fsyncSync(fd);
    closeSync(fd);
    // link() never replaces a file; rename() does.
    if (options.exclusive) linkSync(tmp, file);
    else renameSync(tmp, file);
  } catch (e) {
    try {
      closeSync(fd);
    } catch {
      // closed already
    }
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
  syncDirectory(dirname(file));
}

/** Whether `file` holds exactly `keys` (so a process removes only the file it wrote). */
export function unsealFileHolds(file: string, keys: readonly string[]): boolean {
  try {
    return readFileSync(file, "utf8") === formatUnsealFile(keys);
  } catch {
    return false;
  }
}

function syncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Move `file` out of the way, to `FILE.unused-<time>` beside it, and return the new name: what a
 * self-initializing service does with a key file (or root token) of an init that never happened,
 * rather than refuse every start or overwrite it.
 */
export function moveAside(file: string, now = new Date()): string {
  const to = `${file}.unused-${now.toISOString().replace(/[:.]/g, "-")}`;
  renameSync(file, to);
  return to;
}
