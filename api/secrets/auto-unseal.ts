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
import { dirname, join } from "node:path";
import { rmSync } from "node:fs";
import type { Logger } from "../../runtime/log.ts";
import { readUnsealFile, UnsealFileError, unsealFileHolds, writePrivateFile, writeUnsealFile } from "./unseal-file.ts";
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
  const keys = readUnsealFile(file);
  const status = await vault.status();
  if (keys === undefined) {
    if (status.initialized) {
      const fix = `write the unseal key shares to it (docs/secrets.md, "Auto-unseal")`;
      if (opts.required) throw new UnsealFileError(`unseal key file ${file} does not exist and the secrets service is already initialized: ${fix}, or start without -unseal-key-file`);
      log.warn({ unsealKeyFile: file }, `auto-unseal: ${file} does not exist and the secrets service was initialized without it: it stays sealed until unsealed (capstan secrets unseal); to unseal at every start, ${fix}`);
      return "sealed";
    }
    if (!opts.initialize) throw new UnsealFileError(`unseal key file ${file} does not exist`);
    const rootTokenFile = rootTokenFileOf(file);
    let written: readonly string[] | undefined;
    const material = await vault.init(1, 1, ({ keys: made, rootToken }) => {
      try {
        // Exclusive: a file that appeared since it was read is another process's, initializing
        // this store at the same time; it is never replaced.
        writeUnsealFile(file, made, { exclusive: true });
        written = made;
        writePrivateFile(rootTokenFile, `${rootToken}\n`);
      } catch (e) {
        // Nothing is initialized yet (beforeCommit): the start stops, the store unchanged, and no
        // key file is left for an init that did not happen.
        if (written !== undefined) rmSync(file, { force: true });
        const why = (e as NodeJS.ErrnoException).code === "EEXIST" ? "it appeared meanwhile (another process initializing with it?)" : (e as Error).message;
        throw new UnsealFileError(`cannot write unseal key file ${file} or ${rootTokenFile}: ${why}`);
      }
    }).catch((e: unknown) => {
      // Another process initialized the store first: the file this one wrote is not its key.
      // Removed only while it still holds what this process wrote.
      if (e instanceof VaultStateError && written !== undefined && unsealFileHolds(file, written)) rmSync(file, { force: true });
      throw e;
    });
    await unsealWith(vault, file, material.keys);
    log.info({ unsealKeyFile: file, rootTokenFile }, "auto-unseal: initialized the secrets service, kept its unseal key in the file (0600) and unsealed it");
    return "initialized";
  }
  if (!status.initialized) {
    throw new UnsealFileError(`unseal key file ${file} exists but the secrets service on this store is not initialized: the file belongs to another store (move it away to let the service initialize anew)`);
  }
  await unsealWith(vault, file, keys);
  log.info({ unsealKeyFile: file }, "auto-unseal: unsealed from the unseal key file");
  return "unsealed";
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
  throw new UnsealFileError(`unseal key file ${file} holds ${keys.length} distinct key share(s); this store's secrets service needs ${threshold}`);
}
