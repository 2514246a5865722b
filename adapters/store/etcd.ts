// EtcdStore: the Store contract over a real etcd v3 cluster through the `etcd3` package. It uses
// etcd3 for connections, gRPC stubs and error classes, and its raw KV / Lease / Watch clients for
// every call, so that revisions, compares and watch responses reach us exactly as etcd sent them.
// etcd3's convenience layers (Watcher, Lease with autoKeepAlive, retrying fault policy) are
// avoided on purpose; docs/store.md lists the pitfalls each avoidance closes.
import { createSecureContext } from "node:tls";
import { Etcd3 } from "etcd3";
import type { ICompare, IRequestOp, IResponseHeader } from "etcd3";
import { noop } from "cockatiel";
import { EtcdAuthenticationFailedError, EtcdPermissionDeniedError } from "etcd3";
import { CompactedError, LeaseLostError, StoreUnavailableError } from "./errors.ts";
import {
  isCompactedMessage,
  isConnectionLost,
  isFutureRevisionMessage,
  isLeaseNotFound,
  isUnsent,
  mapEtcdError,
} from "./etcd-errors.ts";
import { toKeyValue } from "./etcd-kv.ts";
import { EtcdWatch, probeCompactRevision } from "./etcd-watch.ts";
import {
  assertCompares,
  assertKey,
  assertLeaseId,
  assertOps,
  assertRevision,
  assertTtl,
  assertValue,
  keyBytes,
  prefixRange,
} from "./keys.ts";
import type {
  Compare,
  KeyValue,
  Lease,
  ListOptions,
  ListResult,
  Op,
  PutOptions,
  Store,
  TxnResult,
  Watch,
  WatchHandlers,
} from "./store.ts";
import { StoreLease } from "./lease.ts";

export interface EtcdStoreOptions {
  /** "host:port" of each cluster member. */
  endpoints: string[];
  /** Deadline of every unary call, connecting included. Default 5000. */
  callTimeoutMs?: number;
  /** How long opening a stream (a watch, a lease keep-alive) may take. Default callTimeoutMs. */
  dialTimeoutMs?: number;
  /**
   * Whether watch events carry prevKv (default true, the full Store contract). openStore turns it
   * off: no consumer of ours reads prevKv (informers resolve a delete from their own cache, the
   * elector re-reads), and with it etcd reads, sends and we decode every changed value twice,
   * in every process watching the key.
   */
  watchPrevKv?: boolean;
  /**
   * Talk TLS to every endpoint (etcds://). PEM contents, not paths: `ca` is the CA that signed
   * etcd's server certificate (default: Node's built-in roots), `cert` and `key` our client
   * certificate for etcd's --client-cert-auth (both or neither).
   */
  tls?: EtcdTls;
  /**
   * etcd user and password (etcd `auth enable`), exchanged for a token before the first call and
   * again when etcd says the token expired. Never part of `description`, logs or errors.
   */
  auth?: EtcdAuth;
}

export interface EtcdTls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

export interface EtcdAuth {
  username: string;
  password: string;
}

/**
 * etcd refused who we are: a wrong user or password, a user without the permission, or a user
 * given to an etcd without authentication. Retrying does not help; the message says what to fix.
 */
export class EtcdAccessError extends Error {
  override readonly name = "EtcdAccessError";
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
  }
}

/** etcd's "every key from here on" range end. */
const RANGE_TO_END = Buffer.from([0]);

export class EtcdStore implements Store {
  readonly description: string;
  private readonly client: Etcd3;
  private readonly callTimeoutMs: number;
  /** Tries of a call gRPC failed before sending it (see call()). */
  private readonly unsentTries: number;
  private readonly dialTimeoutMs: number;
  private readonly watchPrevKv: boolean;
  /** What failures are explained against (see explain()); never the password. */
  private readonly identity: { tls: boolean; clientCert: boolean; user: string | undefined };
  private readonly watches = new Set<EtcdWatch>();
  private progressSafe: Promise<boolean> | null = null;
  private closed = false;

  constructor(options: EtcdStoreOptions) {
    const { endpoints } = options;
    if (!Array.isArray(endpoints) || endpoints.length === 0) {
      throw new TypeError("EtcdStore needs at least one endpoint (host:port)");
    }
    for (const endpoint of endpoints) {
      if (!/^[^\s/:,]+:\d{1,5}$/.test(endpoint)) {
        throw new TypeError(`etcd endpoint must be host:port, got ${JSON.stringify(endpoint)}`);
      }
    }
    this.callTimeoutMs = positiveMs(options.callTimeoutMs ?? 5000, "callTimeoutMs");
    // Enough for etcd3's breaker (three failures) to open on every dead member but one live one.
    this.unsentTries = endpoints.length > 1 ? 3 * endpoints.length : 1;
    this.dialTimeoutMs = positiveMs(options.dialTimeoutMs ?? this.callTimeoutMs, "dialTimeoutMs");
    this.watchPrevKv = options.watchPrevKv ?? true;
    this.description = `${options.tls ? "etcds" : "etcd"}://${endpoints.join(",")}`;
    this.identity = {
      tls: options.tls !== undefined,
      clientCert: options.tls?.cert !== undefined && options.tls.cert !== "",
      user: options.auth?.username,
    };
    const callTimeoutMs = this.callTimeoutMs;
    this.client = new Etcd3({
      hosts: endpoints,
      ...(options.tls ? { credentials: tlsCredentials(options.tls) } : {}),
      ...(options.auth ? { auth: authOption(options.auth) } : {}),
      // Every unary call gets a deadline; streams must not (a watch lives for hours), so they are
      // bounded by our own timers instead. etcd3's `dialTimeout` option is not read by 1.1.2.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
      faultHandling: {
        // No automatic retry: after a deadline or a reset connection a write may have been applied,
        // and re-sending a compare-and-swap would then report a false conflict (or a second
        // increment). Callers get StoreUnavailableError and decide. The per-host circuit breaker
        // (etcd3's default) stays: it steers calls away from a dead member.
        global: noop,
      },
      grpcOptions: {
        // gRPC keep-alive detects a dead connection under a quiet watch (etcd3#153, silent watchers
        // #31/#33); 30 s respects etcd's default --grpc-keepalive-min-time (5 s).
        "grpc.keepalive_time_ms": 30_000,
        "grpc.keepalive_timeout_ms": 10_000,
        // Catch-up watch batches and large lists can exceed gRPC's 4 MiB default; etcd's own
        // client accepts any size. A refused message would fail the watch again on every relist.
        "grpc.max_receive_message_length": -1,
      },
    });
  }

  async get(key: string): Promise<KeyValue | null> {
    assertKey(key);
    const response = await this.call("get", () => this.client.kv.range({ key: keyBytes(key) }));
    const kv = response.kvs[0];
    return kv ? toKeyValue(kv) : null;
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const { start, end } = prefixRange(prefix);
    const { revision, limit, startAfter } = options;
    if (revision !== undefined) assertRevision(revision);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
      throw new RangeError(`limit must be a positive integer, got ${String(limit)}`);
    }
    let key = start.length > 0 ? start : RANGE_TO_END;
    if (startAfter !== undefined) {
      assertKey(startAfter, "startAfter");
      const after = Buffer.concat([keyBytes(startAfter), RANGE_TO_END]); // smallest key > startAfter
      if (after.compare(key) > 0) key = after;
    }
    const rangeEnd = end ?? RANGE_TO_END;
    if (end && key.compare(end) >= 0) {
      // startAfter is past the prefix: nothing to read, but still answer with a real revision.
      return { items: [], revision: revision ?? (await this.revision()), more: false };
    }
    try {
      const response = await this.call("list", () =>
        this.client.kv.range({ key, range_end: rangeEnd, limit: limit ?? 0, revision: revision ?? 0 }),
      );
      return {
        items: response.kvs.map(toKeyValue),
        // A ranged read's header carries the *current* revision even when reading a past one;
        // the snapshot the items belong to is the requested revision.
        revision: revision ?? headerRevision(response.header),
        more: response.more,
      };
    } catch (error) {
      if (revision !== undefined && isCompactedMessage(error)) {
        throw new CompactedError(await this.compactRevisionAfter(revision), revision);
      }
      if (revision !== undefined && isFutureRevisionMessage(error)) {
        throw new RangeError(`cannot list at revision ${revision}: it is in the future`);
      }
      throw error;
    }
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<TxnResult> {
    assertKey(key);
    assertValue(value);
    if (options.lease !== undefined) assertLeaseId(options.lease);
    if (options.expect !== undefined) {
      return this.txn(options.expect, [{ type: "put", key, value, lease: options.lease }]);
    }
    const response = await this.call(
      "put",
      () => this.client.kv.put({ key: keyBytes(key), value: Buffer.from(value), lease: options.lease ?? 0 }),
      options.lease,
    );
    return { succeeded: true, revision: headerRevision(response.header) };
  }

  async delete(key: string, options: { expect?: Compare[] } = {}): Promise<TxnResult> {
    assertKey(key);
    if (options.expect !== undefined) return this.txn(options.expect, [{ type: "delete", key }]);
    // Deleting an absent key changes nothing and consumes no revision (etcd's rule).
    const response = await this.call("delete", () => this.client.kv.deleteRange({ key: keyBytes(key) }));
    return { succeeded: true, revision: headerRevision(response.header) };
  }

  async deletePrefix(prefix: string): Promise<TxnResult> {
    return this.txn([], [{ type: "deletePrefix", prefix }]);
  }

  async txn(compares: Compare[], success: Op[], failure: Op[] = []): Promise<TxnResult> {
    assertCompares(compares);
    assertOps(success);
    assertOps(failure);
    const lease = [...success, ...failure].find((op) => op.type === "put" && op.lease !== undefined);
    const response = await this.call(
      "txn",
      () =>
        this.client.kv.txn({
          compare: compares.map(toEtcdCompare),
          success: success.map(toEtcdOp),
          failure: failure.map(toEtcdOp),
        }),
      lease?.type === "put" ? lease.lease : undefined,
    );
    return { succeeded: response.succeeded, revision: headerRevision(response.header) };
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Watch {
    this.assertOpen();
    const { start, end } = prefixRange(prefix);
    assertRevision(fromRevision, "fromRevision");
    const watch = new EtcdWatch({
      watchClient: this.client.watchClient,
      key: start.length > 0 ? start : RANGE_TO_END,
      rangeEnd: end ?? RANGE_TO_END,
      fromRevision,
      prevKv: this.watchPrevKv,
      handlers,
      createTimeoutMs: this.dialTimeoutMs,
      progressRequestsSafe: () => this.progressRequestsSafe(),
      onDone: (w) => this.watches.delete(w),
    });
    this.watches.add(watch);
    return watch;
  }

  async revision(): Promise<number> {
    // A count-only read of one key: the cheapest request whose header carries the revision.
    const response = await this.call("revision", () =>
      this.client.kv.range({ key: RANGE_TO_END, count_only: true }),
    );
    return headerRevision(response.header);
  }

  /**
   * Forgets history below `revision`. Compacting at or below the current compact revision is a
   * no-op (that history is already gone). `physical` waits until etcd has also removed the data
   * from its backend, not only from its index.
   */
  async compact(revision: number, options: { physical?: boolean } = {}): Promise<void> {
    assertRevision(revision);
    try {
      await this.call("compact", () =>
        this.client.kv.compact({ revision, physical: options.physical ?? false }),
      );
    } catch (error) {
      if (isCompactedMessage(error)) return;
      if (isFutureRevisionMessage(error)) {
        throw new RangeError(`cannot compact at revision ${revision}: it is in the future`);
      }
      throw error;
    }
  }

  async grantLease(ttlSeconds: number): Promise<Lease> {
    assertTtl(ttlSeconds);
    const response = await this.call("lease grant", () =>
      this.client.leaseClient.leaseGrant({ TTL: ttlSeconds, ID: 0 }),
    );
    if (response.error) throw new Error(`etcd refused to grant a lease: ${response.error}`);
    // etcd raises a TTL below its minimum (ceil(1.5 x election timeout), 2 s by default).
    return new StoreLease(this, String(response.ID), Number(response.TTL));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.watches].map((w) => w.close()));
    this.client.close();
  }

  /** Renews a lease once over a short-lived keep-alive stream; the remaining TTL, or LeaseLostError. */
  async keepAliveOnce(id: string): Promise<number> {
    this.assertOpen();
    const deadline = Date.now() + this.dialTimeoutMs;
    let ttl: number;
    try {
      const stream = await this.client.leaseClient.leaseKeepAlive({ deadline });
      ttl = await new Promise<number>((resolve, reject) => {
        stream.on("data", (response) => {
          resolve(Number(response.TTL));
          stream.end(); // see closeStream in etcd-watch.ts: end() first keeps etcd3's host healthy
          stream.cancel();
        });
        stream.on("error", reject);
        stream.on("end", () => reject(new StoreUnavailableError("etcd closed the lease keep-alive stream")));
        stream.write({ ID: id });
      });
    } catch (error) {
      throw this.explain(mapEtcdError(error, "lease keep-alive", this.description, id), "lease keep-alive");
    }
    // etcd answers a keep-alive for an expired or revoked lease with TTL 0 (no error).
    if (ttl <= 0) throw new LeaseLostError(id);
    return ttl;
  }

  async revokeLease(id: string): Promise<void> {
    try {
      await this.call("lease revoke", () => this.client.leaseClient.leaseRevoke({ ID: id }));
    } catch (error) {
      // Already expired or revoked: the outcome the caller asked for.
      if (isLeaseNotFound(error)) return;
      throw error;
    }
  }

  /**
   * Runs one unary call and maps its failure (see mapEtcdError). `leaseId` names the lease a
   * write refers to, so that "lease not found" becomes LeaseLostError for it.
   */
  private async call<T>(what: string, fn: () => Promise<T>, leaseId?: string): Promise<T> {
    this.assertOpen();
    const reads = READ_ONLY_CALLS.has(what);
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        if (attempt < this.unsentTries && (isUnsent(error) || (reads && isConnectionLost(error)))) continue;
        throw this.explain(mapEtcdError(error, what, this.description, leaseId), what);
      }
    }
  }

  /**
   * Says what a TLS or authentication failure means. gRPC reports a refused handshake as
   * UNAVAILABLE with OpenSSL's wording (it stays a StoreUnavailableError: a certificate can be
   * fixed on the other side); etcd's own refusals of a user become EtcdAccessError.
   */
  private explain(error: unknown, what: string): unknown {
    const at = `etcd ${what} at ${this.description} failed`;
    if (error instanceof StoreUnavailableError) {
      const detail = error.cause instanceof Error ? error.cause.message.trim() : error.message;
      const hint = tlsFailureHint(detail, this.identity);
      return hint ? new StoreUnavailableError(`${at}: ${hint} (${detail})`, error.cause) : error;
    }
    const hint = accessFailureHint(error, this.identity.user);
    return hint ? new EtcdAccessError(`${at}: ${hint} (${(error as Error).message})`, error) : error;
  }

  /** For a list below the compact revision: the compact revision (see probeCompactRevision). */
  private async compactRevisionAfter(requested: number): Promise<number> {
    const probed = await probeCompactRevision(this.client.watchClient, this.callTimeoutMs);
    // When the probe gets no answer, requested + 1 is the best lower bound we can state.
    return probed ?? requested + 1;
  }

  /**
   * Whether this etcd answers a WatchProgressRequest only after the events it covers. Releases
   * before 3.4.31 / 3.5.13 send the answer on a side channel that can overtake queued events and
   * ignore unsynced watchers (etcd#15220, fixed by #15237 and #17557): a progress revision from
   * them could make a consumer skip events. Kubernetes gates its use on the same versions. Asked
   * once per store; an unreachable etcd counts as "no" and is asked again next time.
   */
  private progressRequestsSafe(): Promise<boolean> {
    this.progressSafe ??= this.call("status", () => this.client.maintenance.status()).then(
      (status) => serverAnswersProgressInOrder(status.version),
      () => {
        this.progressSafe = null;
        return false;
      },
    );
    return this.progressSafe;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`store ${this.description} is closed`);
  }
}

export function serverAnswersProgressInOrder(version: string): boolean {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!match) return false;
  const [major, minor, patch] = match.slice(1).map(Number) as [number, number, number];
  if (major !== 3) return major > 3;
  if (minor === 4) return patch >= 31;
  if (minor === 5) return patch >= 13;
  return minor > 5;
}

function headerRevision(header: IResponseHeader): number {
  return Number(header.revision);
}

function toEtcdCompare(compare: Compare): ICompare {
  const key = keyBytes(compare.key);
  switch (compare.target) {
    case "modRevision":
      return { key, target: "Mod", result: "Equal", mod_revision: compare.equals };
    case "createRevision":
      return { key, target: "Create", result: "Equal", create_revision: compare.equals };
    case "version":
      return { key, target: "Version", result: "Equal", version: compare.equals };
    case "value":
      return { key, target: "Value", result: "Equal", value: Buffer.from(compare.equals) };
    case "lease":
      return { key, target: "Lease", result: "Equal", lease: compare.equals };
  }
}

function toEtcdOp(op: Op): IRequestOp {
  switch (op.type) {
    case "put":
      return { request_put: { key: keyBytes(op.key), value: Buffer.from(op.value), lease: op.lease ?? 0 } };
    case "delete":
      return { request_delete_range: { key: keyBytes(op.key) } };
    case "deletePrefix": {
      const { start, end } = prefixRange(op.prefix);
      return { request_delete_range: { key: start, range_end: end ?? RANGE_TO_END } };
    }
  }
}

const CLIENT_CERT_REFUSED =
  /alert (bad certificate|certificate required|unknown ca|certificate unknown|certificate expired|certificate revoked|unsupported certificate|access denied)/i;
const SERVER_CERT_UNTRUSTED =
  /unable to verify the first certificate|self[- ]signed certificate|unable to get (local )?issuer certificate|unable to verify leaf signature|certificate has expired|certificate is not yet valid|Hostname\/IP does not match|ERR_TLS_CERT_ALTNAME_INVALID|certificate signature failure/i;
const NOT_TLS = /before secure TLS connection was established|wrong version number|packet length too long|unknown protocol/i;

/** What a failed connection's text means for TLS, or undefined when it is not about TLS. */
export function tlsFailureHint(detail: string, identity: { tls: boolean; clientCert: boolean }): string | undefined {
  if (!identity.tls) {
    // etcd's TLS port closes on a plain HTTP/2 preface; a closed port would say ECONNREFUSED.
    return /Last error: Failed to connect\b/.test(detail)
      ? "the connection closed before gRPC could start; if this etcd serves TLS, use etcds://"
      : undefined;
  }
  if (CLIENT_CERT_REFUSED.test(detail)) {
    return identity.clientCert
      ? "etcd refused our TLS client certificate: it must be signed by a CA in etcd's --trusted-ca-file, " +
          "be valid now and allow client auth (-store-cert, -store-key)"
      : "etcd requires a TLS client certificate (--client-cert-auth) and none was given (-store-cert, -store-key)";
  }
  if (SERVER_CERT_UNTRUSTED.test(detail)) {
    return "etcd's server certificate is not trusted: it must be signed by the CA given with -store-ca " +
      "(without one, Node's built-in roots), be valid now and name the host or IP address dialled";
  }
  if (NOT_TLS.test(detail)) return "no TLS handshake: this endpoint does not speak TLS (use etcd:// for a plain etcd)";
  return undefined;
}

/** What etcd's refusal of a user means, or undefined for other failures. */
export function accessFailureHint(error: unknown, user: string | undefined): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const who = user === undefined ? "no user was given" : `user ${JSON.stringify(user)}`;
  if (error instanceof EtcdAuthenticationFailedError) {
    return `${who}: wrong user name or password (-store-user, -store-password-file or CAPSTAN_STORE_PASSWORD)`;
  }
  if (error.message.includes("etcdserver: user name is empty")) {
    return "etcd has authentication enabled: give a user and its password (-store-user, -store-password-file or CAPSTAN_STORE_PASSWORD)";
  }
  if (error.message.includes("etcdserver: authentication is not enabled")) {
    return `${who}, but etcd has authentication disabled (run etcdctl auth enable, or give no user)`;
  }
  if (error instanceof EtcdPermissionDeniedError) {
    return user === undefined
      ? "permission denied: etcd has authentication enabled and no user was given (-store-user; " +
          "with --client-cert-auth etcd takes the user from the client certificate's CN)"
      : `permission denied: ${who} lacks read-write on every key, from the key \\0 on (docs/store.md: etcd over TLS, with client certificates and users)`;
  }
  return undefined;
}

/**
 * etcd3's `credentials` (grpc-js createSsl's arguments). A missing CA stays undefined: grpc-js then
 * trusts Node's built-in roots (etcd3's type says Buffer, createSsl accepts null/undefined).
 */
function tlsCredentials(tls: EtcdTls): { rootCertificate: Buffer; privateKey?: Buffer; certChain?: Buffer } {
  const pem = (value: string | Buffer | undefined) =>
    value === undefined || value === "" ? undefined : Buffer.isBuffer(value) ? value : Buffer.from(value);
  const ca = pem(tls.ca);
  const cert = pem(tls.cert);
  const key = pem(tls.key);
  if ((cert === undefined) !== (key === undefined)) {
    throw new TypeError(`etcd TLS: a client ${cert ? "certificate needs its key" : "key needs its certificate"} (give both or neither)`);
  }
  // grpc-js builds the TLS context here: a PEM it cannot use fails now, not on the first call.
  try {
    createSecureContext({ ca, cert, key });
  } catch (error) {
    throw new TypeError(`etcd TLS: the CA, client certificate or key is not usable: ${(error as Error).message}`);
  }
  return { rootCertificate: ca as Buffer, ...(cert && key ? { certChain: cert, privateKey: key } : {}) };
}

function authOption(auth: EtcdAuth): { username: string; password: string } {
  if (typeof auth.username !== "string" || auth.username === "") throw new TypeError("etcd auth: the user name is empty");
  if (typeof auth.password !== "string") throw new TypeError("etcd auth: the password is not a string");
  return { username: auth.username, password: auth.password };
}

function positiveMs(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number of ms`);
  return value;
}

/**
 * Calls that change nothing, so sending one again after its connection broke is always safe.
 * A write is not: it may have been applied before the connection broke, and re-sending a
 * compare-and-swap would then report a false conflict. etcd's own Go client draws the same line.
 */
const READ_ONLY_CALLS = new Set(["get", "list", "revision", "status"]);

