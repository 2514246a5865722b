// What Secret-sync needs of the secrets service, stated structurally so that this controller does
// not import api/secrets (controllers meet other components only through the store and the
// interfaces they are handed). api/secrets' Vault and readSecrets satisfy these as they are.

/** One decrypted secret record, as GET /v2/secrets answers it (only the fields used here). */
export interface SecretFileRecord {
  /** The file path as written: relative (under /platform/app) or absolute. */
  path: string;
  content: string;
  /** Octal permission bits as text, e.g. "400". */
  mode: string;
  /** Store revision of the record's last write: of two spellings of one file, the later wins. */
  modRevision?: number;
}

export interface SyncVault {
  /** True while the master key is not in memory: nothing can be decrypted, so nothing is installed. */
  sealed(): boolean;
  /**
   * Calls `listener` after every unseal; returns the function that unregisters it. A seal needs no
   * notification: every reconcile checks sealed() first.
   */
  onUnseal(listener: () => void): () => void;
}

/** The decrypted records of one proc (`<app>.<type>.<proc_name>`) of `app`. */
export type ReadSecrets<S, V> = (store: S, vault: V, app: string, proc: string) => Promise<readonly SecretFileRecord[]>;
