// The seal. The master key that encrypts every secret lives only in this process's memory, and only
// while unsealed. `init` creates it once per store, splits it into Shamir shares (the audited
// `shamir-secret-sharing` package) and stores nothing from which it could be rebuilt: only
// _sys/config {shares, threshold}, _sys/keycheck (a known plaintext encrypted under the key, to
// tell a right set of shares from a wrong one) and _sys/root-token-hash. A new process on the same
// store starts sealed; `threshold` distinct shares given to `unseal` rebuild the key.
//
// Threshold 1 is allowed (a single operator); the library needs at least 2, so then every share is
// the master key itself. That is what threshold 1 means, and docs/secrets.md says so.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { combine, split } from "shamir-secret-sharing";
import type { Store } from "../../adapters/store/store.ts";
import { silentLogger, type Logger } from "../../runtime/log.ts";
import { ApiError, type ErrorBody } from "../http/index.ts";
import { decrypt, DecryptError, encrypt, masterKeyBytes } from "./crypto.ts";
import { aadOf, decodePlaintext, encodePlaintext, sysKeys, type SecretRecord } from "./record.ts";

/** A call that needs the master key while the service is sealed: 503 {code: "Unavailable", message: "sealed"}. */
export class SealedError extends ApiError {
  override readonly name: string = "SealedError";
  constructor() {
    super(503, { code: "Unavailable", message: "sealed" });
  }
}

/**
 * An init/unseal/seal call that does not fit the current state or input: a 400 naming `field`, a
 * 401 (no valid root token), or a 409 NotAllowed (without a reason) for the wrong state.
 */
export class VaultStateError extends ApiError {
  override readonly name: string = "VaultStateError";
  declare readonly status: 400 | 401 | 409;
  constructor(status: 400 | 401 | 409, field: string, message: string) {
    super(status, vaultStateBody(status, field, message), { field });
  }
}

function vaultStateBody(status: 400 | 401 | 409, field: string, message: string): ErrorBody {
  if (status === 400) return { code: "BadRequest", message, details: [{ path: field, message }] };
  if (status === 401) return { code: "Unauthorized", message };
  return { code: "NotAllowed", message };
}

export interface SealConfig {
  shares: number;
  threshold: number;
}

export interface VaultStatus {
  initialized: boolean;
  sealed: boolean;
  /** Distinct shares given since the last reset. */
  progress: number;
  /** 0 before init. */
  threshold: number;
  shares: number;
}

const keycheckPlaintext = Buffer.from("capstan secrets keycheck v1", "utf8");
const keycheckAad = "_sys/keycheck";
const shareBytes = masterKeyBytes + 1; // the library appends the x coordinate

const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest();

export class Vault {
  private key: Buffer | null = null;
  private pending: Buffer[] = [];
  /** Unseal, init and seal run one at a time: combining shares is async. */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly unsealListeners = new Set<() => void>();
  private readonly sealListeners = new Set<() => void>();
  private readonly log: Logger;

  constructor(
    private readonly store: Store,
    log: Logger = silentLogger,
  ) {
    this.log = log.child({ component: "vault" });
  }

  sealed(): boolean {
    return this.key === null;
  }

  /** Called after every unseal (the Secret-sync controller starts). Returns an unsubscribe function. */
  onUnseal(cb: () => void): () => void {
    this.unsealListeners.add(cb);
    return () => this.unsealListeners.delete(cb);
  }

  /** Called after every seal (the Secret-sync controller stops). Returns an unsubscribe function. */
  onSeal(cb: () => void): () => void {
    this.sealListeners.add(cb);
    return () => this.sealListeners.delete(cb);
  }

  encrypt(app: string, proc: string, path: string, record: SecretRecord, updatedAt = new Date().toISOString()): string {
    if (this.key === null) throw new SealedError();
    return encrypt(this.key, aadOf(app, proc, path), encodePlaintext(record, updatedAt));
  }

  /** Throws SealedError, or DecryptError when the value does not belong at this address. */
  decrypt(app: string, proc: string, path: string, value: string): SecretRecord & { updatedAt: string } {
    if (this.key === null) throw new SealedError();
    return decodePlaintext(decrypt(this.key, aadOf(app, proc, path), value));
  }

  async config(): Promise<SealConfig | null> {
    const kv = await this.store.get(sysKeys.config);
    return kv === null ? null : (JSON.parse(kv.value) as SealConfig);
  }

  async status(): Promise<VaultStatus> {
    const config = await this.config();
    return {
      initialized: config !== null,
      sealed: this.sealed(),
      progress: this.pending.length,
      threshold: config?.threshold ?? 0,
      shares: config?.shares ?? 0,
    };
  }

  /**
   * Create the master key once per store; answers the shares (base64) and the root token.
   * `beforeCommit` gets them before the store records the init (auto-unseal writes its file
   * there: a crash between the two then leaves a file and no init, never an init whose shares
   * are lost); a failure there commits nothing.
   */
  init(shares: number, threshold: number, beforeCommit?: (material: { keys: string[]; rootToken: string }) => void | Promise<void>): Promise<{ keys: string[]; rootToken: string }> {
    return this.serial(async () => {
      const master = randomBytes(masterKeyBytes);
      // The library wants a plain Uint8Array; the copy is wiped with the key below.
      const secret = new Uint8Array(master);
      const parts = threshold === 1 ? Array.from({ length: shares }, () => Buffer.from(master)) : (await split(secret, shares, threshold)).map((s) => Buffer.from(s));
      secret.fill(0);
      const rootToken = `csr_${randomBytes(32).toString("base64url")}`;
      const keys = parts.map((p) => p.toString("base64"));
      if (beforeCommit !== undefined) {
        try {
          if ((await this.config()) !== null) throw new VaultStateError(409, "init", "already initialized");
          await beforeCommit({ keys, rootToken });
        } catch (e) {
          master.fill(0);
          throw e;
        }
      }
      const result = await this.store.txn(
        [{ key: sysKeys.config, target: "createRevision", equals: 0 }],
        [
          { type: "put", key: sysKeys.config, value: JSON.stringify({ shares, threshold } satisfies SealConfig) },
          { type: "put", key: sysKeys.keycheck, value: encrypt(master, keycheckAad, keycheckPlaintext) },
          { type: "put", key: sysKeys.rootTokenHash, value: sha256(rootToken).toString("hex") },
        ],
      );
      master.fill(0);
      if (!result.succeeded) throw new VaultStateError(409, "init", "already initialized");
      this.log.info({ shares, threshold }, "initialized; sealed until unsealed with the shares");
      return { keys, rootToken };
    });
  }

  /** Add one share; with `threshold` distinct shares, rebuild and check the key. */
  unseal(share: string): Promise<{ sealed: boolean; progress: number; threshold: number }> {
    return this.serial(async () => {
      const config = await this.config();
      if (config === null) throw new VaultStateError(409, "key", "not initialized; call /v2/sys/init first");
      if (this.key !== null) return { sealed: false, progress: 0, threshold: config.threshold };
      const bytes = decodeShare(share, config.threshold === 1 ? masterKeyBytes : shareBytes);
      // A share given twice counts once (an operator pasting the same key again is not progress).
      if (!this.pending.some((p) => p.equals(bytes))) this.pending.push(bytes);
      if (this.pending.length < config.threshold) return { sealed: true, progress: this.pending.length, threshold: config.threshold };

      const given = this.pending;
      this.pending = [];
      const keycheck = await this.store.get(sysKeys.keycheck);
      if (keycheck === null) throw new Error("store holds _sys/config but no _sys/keycheck");
      const wrongShares = () => new VaultStateError(400, "key", `the ${given.length} shares given do not rebuild the master key; progress is reset, give ${config.threshold} shares again`);
      let candidate: Buffer;
      try {
        candidate = config.threshold === 1 ? Buffer.from(given[0]!) : Buffer.from(await combine(given.map((p) => new Uint8Array(p))));
      } catch {
        // The library refuses shares whose x coordinates (last byte) collide: wrong shares, as
        // surely as a failed key check (a forged share has that 1 in 256 chance).
        throw wrongShares();
      }
      try {
        if (!decrypt(candidate, keycheckAad, keycheck.value).equals(keycheckPlaintext)) throw new DecryptError("keycheck mismatch");
      } catch (e) {
        if (!(e instanceof DecryptError)) throw e;
        candidate.fill(0);
        throw wrongShares();
      }
      this.key = candidate;
      this.log.info("unsealed");
      this.notify(this.unsealListeners, "unseal");
      return { sealed: false, progress: 0, threshold: config.threshold };
    });
  }

  /** Check the root token (constant time). */
  async verifyRootToken(token: string | undefined): Promise<void> {
    const kv = await this.store.get(sysKeys.rootTokenHash);
    if (kv === null) throw new VaultStateError(409, "init", "not initialized");
    const expected = Buffer.from(kv.value, "hex");
    if (token === undefined || token === "" || !timingSafeEqual(sha256(token), expected)) {
      throw new VaultStateError(401, "access-token", "a valid root token is required");
    }
  }

  /** Forget the key (and any shares given so far). Idempotent. */
  seal(): Promise<void> {
    return this.serial(async () => {
      this.pending = [];
      if (this.key === null) return;
      this.key.fill(0);
      this.key = null;
      this.log.info("sealed");
      this.notify(this.sealListeners, "seal");
    });
  }

  /** A listener's failure is its own: the seal state has already changed and stays changed. */
  private notify(listeners: Set<() => void>, what: string): void {
    for (const cb of listeners) {
      try {
        cb();
      } catch (err) {
        this.log.error({ err, event: what }, "seal state listener failed");
      }
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => {});
    return next;
  }
}

function decodeShare(share: string, bytes: number): Buffer {
  const decoded = /^[A-Za-z0-9+/]+={0,2}$/.test(share) ? Buffer.from(share, "base64") : Buffer.alloc(0);
  if (decoded.length !== bytes || decoded.toString("base64") !== share) {
    throw new VaultStateError(400, "key", `key must be one of the base64 unseal keys that init returned (${bytes} bytes)`);
  }
  return decoded;
}
