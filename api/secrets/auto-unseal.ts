// Auto-unseal at start (docs/secrets.md, "Auto-unseal"): the service reads the key shares from its
// unseal key file and unseals itself, with no API call. Only at start: an operator's explicit seal
// (POST /v2/sys/seal) holds until the next restart.
//
// - The file exists: its mode and owner are checked (unseal-file.ts), then its shares are given to
//   the vault. A file that does not unseal this store (wrong shares, too few, or a store that was
//   never initialized) stops the start with a message naming the file.
// - The file does not exist and the store is not initialized, with `initialize`: the service
//   initializes itself (one share, threshold 1: the share is the master key), writes the share
//   to the file and the root token beside it (both 0600, atomically, before the init commits),
//   and unseals.
// - The file does not exist and the store is initialized: an error when the file was asked for
//   explicitly (`required`); otherwise (capstan up's default, a data directory from before
//   auto-unseal) a warning, and the service stays sealed.
// - The file exists but the store is not initialized: its init never committed (the process died
//   between writing the file and the store's write, or that write failed), or the file is another
//   store's. As capstan up's default file (not `required`), it is moved aside (kept, never
//   deleted) and the service initializes anew; a file the operator named stops the start.
// - Another process commits its init first: if the file now holds its shares (the same file),
//   they unseal this one too; otherwise the start stops, asking for that process's file.
import { dirname, join } from "node:path";
import type { Logger } from "../../runtime/log.ts";
import { existsSync, rmSync } from "node:fs";
import { moveAside, readUnsealFile, UnsealFileError, unsealFileHolds, writePrivateFile, writeUnsealFile } from "./unseal-file.ts";
import { VaultStateError, type Vault } from "./vault.ts";

export interface AutoUnsealOptions {
  /** The unseal key file. */
  file: string;
  /** Initialize an uninitialized store and write the file when it does not exist. */
  initialize: boolean;
  /** A missing file of an initialized store is an error (the operator named it), not a warning. */
  required: boolean;
  log: Logger;
}

export type AutoUnsealOutcome = "initialized" | "unsealed" | "sealed";

/** Where a self-initialized service keeps its root token: beside the unseal key file. */
export const rootTokenFileOf = (unsealKeyFile: string) => join(dirname(unsealKeyFile), "secrets-root-token");

/** Throws UnsealFileError (naming the file, never its content) when the service must not start. */
export async function autoUnseal(vault: Vault, opts: AutoUnsealOptions): Promise<AutoUnsealOutcome> {
  const { file, log } = opts;
  let keys = readUnsealFile(file);
  const status = await vault.status();
  if (keys !== undefined && !status.initialized && opts.initialize && !opts.required) {
    const aside = moveAside(file);
    log.warn({ unsealKeyFile: file, movedTo: aside }, `auto-unseal: ${file} holds shares of an init this store never recorded (a first start that stopped half-way?): moved it to ${aside} and initializing anew`);
    keys = undefined;
  }
  if (keys === undefined) {
    if (status.initialized) {
      const fix = `write the unseal key shares to it (docs/secrets.md, "Auto-unseal")`;
      if (opts.required) throw new UnsealFileError(`unseal key file ${file} does not exist and the secrets service is already initialized: ${fix}, or start without -unseal-key-file`);
      log.warn({ unsealKeyFile: file }, `auto-unseal: ${file} does not exist and the secrets service was initialized without it: it stays sealed until unsealed (capstan secrets unseal); to unseal at every start, ${fix}`);
      return "sealed";
    }
    if (!opts.initialize) throw new UnsealFileError(`unseal key file ${file} does not exist`);
    return await initialize(vault, file, log);
  }
  if (!status.initialized) {
    throw new UnsealFileError(`unseal key file ${file} exists but the secrets service on this store is not initialized: the file is another store's, or a first start stopped before recording its init (move the file away to let the service initialize anew)`);
  }
  await unsealWith(vault, file, keys);
  log.info({ unsealKeyFile: file }, "auto-unseal: unsealed from the unseal key file");
  return "unsealed";
}

async function initialize(vault: Vault, file: string, log: Logger): Promise<AutoUnsealOutcome> {
  const rootTokenFile = rootTokenFileOf(file);
  let written: readonly string[] | undefined;
  let material: { keys: string[] };
  try {
    material = await vault.init(1, 1, ({ keys: made, rootToken }) => {
      try {
        // Exclusive: a file that appeared since it was read is another process's, initializing
        // this store at the same time; it is never replaced.
        writeUnsealFile(file, made, { exclusive: true });
        written = made;
        // A root token file of an earlier init is kept (moved aside), never overwritten.
        if (existsSync(rootTokenFile)) log.warn({ rootTokenFile, movedTo: moveAside(rootTokenFile) }, "auto-unseal: moved an earlier root token file aside");
        writePrivateFile(rootTokenFile, `${rootToken}\n`);
      } catch (e) {
        // Nothing is initialized yet (beforeCommit): the start stops, the store unchanged, and no
        // key file is left for an init that did not happen.
        if (written !== undefined) rmSync(file, { force: true });
        const why = (e as NodeJS.ErrnoException).code === "EEXIST" ? "it appeared meanwhile (another process initializing with it?)" : (e as Error).message;
        throw new UnsealFileError(`cannot write unseal key file ${file} or ${rootTokenFile}: ${why}`);
      }
    });
  } catch (e) {
    // A failure that is not a lost race (the store unreachable, say) keeps the file: the init may
    // have been recorded all the same. If it was not, the next start moves the file aside.
    if (!(e instanceof VaultStateError)) throw e;
    // Another process recorded its init first. The file this one wrote is not its key.
    if (written !== undefined && unsealFileHolds(file, written)) rmSync(file, { force: true });
    // The winner used this same file: its shares unseal this service too.
    const theirs = readUnsealFile(file);
    if (theirs === undefined) throw new UnsealFileError(`another process initialized the secrets service first: give its unseal key file as ${file}`);
    await unsealWith(vault, file, theirs);
    log.info({ unsealKeyFile: file }, "auto-unseal: another process initialized the secrets service first; unsealed from its key file");
    return "unsealed";
  }
  await unsealWith(vault, file, material.keys);
  log.info({ unsealKeyFile: file, rootTokenFile }, "auto-unseal: initialized the secrets service, kept its unseal key in the file (0600) and unsealed it");
  return "initialized";
}

async function unsealWith(vault: Vault, file: string, keys: readonly string[]): Promise<void> {
  let sealed = true;
  let threshold = 0;
  for (const key of keys) {
    try {
      ({ sealed, threshold } = await vault.unseal(key));
    } catch (e) {
      if (e instanceof VaultStateError) throw new UnsealFileError(`unseal key file ${file}: its shares do not unseal this store's secrets service (${e.message})`);
      throw e;
    }
    if (!sealed) return;
  }
  await vault.seal(); // drops the shares given
  throw new UnsealFileError(`unseal key file ${file} holds ${new Set(keys).size} distinct key share(s); this store's secrets service needs ${threshold}`);
}
