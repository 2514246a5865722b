// Token verification for every API, from the token records in the shared store (docs/security.md,
// "How a process checks a token"). Every Capstan process that serves an API opens the same store,
// so the orchestrator and the secrets service check tokens exactly as the console does, with no
// call to the console on the request path.
//
// Invariant (revocation): a token record, and the app list that makes a user a maintainer, are
// reused for at most `ttlMs` (2 s) after they were read from the store. A revoked token, a removed
// maintainer or a changed grant therefore stops working everywhere within ttlMs plus one store
// read; in the process that made the change, at once (`forget()`).
//
// Only hits are cached. An unknown id is read from the store every time, so a token created a
// moment ago on another console works at once; concurrent reads of one id share one store call.
// A token string that verified is remembered for as long as its record is (same `until`), so a
// repeat within those ttlMs needs no parse and no SHA-256; only its expiry is checked again.
import type { Store } from "../../adapters/store/store.ts";
import { systemWallClock, type WallClock } from "../console/clock.ts";
import { AppRecord, appsPrefix, decodeRecord, TokenRecord, tokenKey } from "../console/records.ts";
import { operatorTokenParts } from "../console/operator-token.ts";
import { hashSecret, parseToken, sameHash } from "../console/tokens.ts";
import { unauthorized } from "../http/index.ts";
import type { Principal } from "./principal.ts";

export interface TokenVerifierOptions {
  store: Store;
  /** Wall clock for token expiry and cache ages (default Date.now). */
  clock?: WallClock;
  /** How long a read token record or app list is reused (default 2000 ms). */
  ttlMs?: number;
}

/** The one answer for every bad token, so a caller cannot tell unknown, wrong, expired and revoked apart. */
export const badTokenMessage = "invalid, expired or revoked access token";

interface Cached<T> {
  value: T;
  until: number;
}

const maxCachedTokens = 10_000;

/**
 * The one app set of every caller with none of its own (admin, sync, a user maintaining nothing):
 * shared, so it must not change; add, delete and clear throw.
 */
const noApps: ReadonlySet<string> = frozenEmptySet();

function frozenEmptySet(): ReadonlySet<string> {
  const set = new Set<string>();
  const refuse = () => {
    throw new TypeError("the shared empty app set is read-only");
  };
  Object.defineProperties(set, { add: { value: refuse }, delete: { value: refuse }, clear: { value: refuse } });
  return Object.freeze(set);
}

/** A token string that verified against its record, kept while that record is cached. */
interface Verified {
  tokenId: string;
  user: string;
  role: TokenRecord["role"];
  /** A viewer's granted apps (built once); undefined for the other roles. */
  grants: ReadonlySet<string> | undefined;
  /** The record's expiresAt in ms (undefined: never; NaN, never as well, as Date.parse decides). */
  expiresAt: number | undefined;
  /** The `until` of the record it was checked against. */
  until: number;
}

interface AppIndex {
  names: Set<string>;
  byMaintainer: Map<string, Set<string>>;
}

export class TokenVerifier {
  private readonly store: Store;
  private readonly clock: WallClock;
  private readonly ttlMs: number;
  private readonly tokens = new Map<string, Cached<TokenRecord>>();
  /** Keyed by the whole token string (never logged); only tokens that verified. */
  private readonly verified = new Map<string, Verified>();
  private readonly tokenReads = new Map<string, Promise<Cached<TokenRecord> | null>>();
  private apps: Cached<AppIndex> | undefined;
  private appsRead: Promise<AppIndex> | undefined;
  /** Bumped by forget(): a read that started before it must not refill the cache. */
  private generation = 0;

  constructor(opts: TokenVerifierOptions) {
    this.store = opts.store;
    this.clock = opts.clock ?? systemWallClock;
    this.ttlMs = opts.ttlMs ?? 2000;
  }

  /** The caller a token names; throws 401 for anything but a valid, unexpired, stored token. */
  async verify(token: string): Promise<Principal> {
    const hit = this.verified.get(token);
    if (hit !== undefined) {
      const now = this.clock.now();
      if (hit.until > now) {
        if (hit.expiresAt !== undefined && hit.expiresAt <= now) throw unauthorized(badTokenMessage);
        return { tokenId: hit.tokenId, user: hit.user, role: hit.role, apps: hit.grants ?? (await this.appsOf(hit.role, hit.user)) };
      }
      this.verified.delete(token);
    }
    // An issued token, or an operator-chosen admin token (CAPSTAN_ADMIN_TOKEN; its id is derived).
    const parts = parseToken(token) ?? operatorTokenParts(token);
    if (parts === null) throw unauthorized(badTokenMessage);
    const generation = this.generation;
    const cached = await this.token(parts.id);
    const record = cached?.value ?? null;
    if (record === null || !sameHash(record.hash, hashSecret(parts.secret))) throw unauthorized(badTokenMessage);
    const expiresAt = record.expiresAt !== undefined ? Date.parse(record.expiresAt) : undefined;
    if (expiresAt !== undefined && expiresAt <= this.clock.now()) throw unauthorized(badTokenMessage);
    const grants = record.role === "viewer" ? new Set(record.apps ?? []) : undefined;
    // Remembered only while its record is cached (a record read across a forget() is not).
    if (generation === this.generation && this.tokens.get(parts.id) === cached) {
      if (this.verified.size >= maxCachedTokens) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, { tokenId: record.id, user: record.user, role: record.role, grants, expiresAt, until: cached!.until });
    }
    return { tokenId: record.id, user: record.user, role: record.role, apps: grants ?? (await this.appsOf(record.role, record.user)) };
  }

  /** Drop everything cached: the console calls it after it changed a token or an app. */
  forget(): void {
    this.generation++;
    this.verified.clear();
    this.tokens.clear();
    this.tokenReads.clear();
    this.apps = undefined;
    this.appsRead = undefined;
  }

  /** The record of token `id` (null: none) with the time its cached copy expires. */
  private async token(id: string): Promise<Cached<TokenRecord> | null> {
    const now = this.clock.now();
    const hit = this.tokens.get(id);
    if (hit !== undefined && hit.until > now) return hit;
    let read = this.tokenReads.get(id);
    if (read === undefined) {
      const generation = this.generation;
      read = this.store
        .get(tokenKey(id))
        .then((kv) => {
          const record = kv === null ? null : decodeRecord(TokenRecord, kv.key, kv.value);
          if (record === null) return null;
          const cached = { value: record, until: now + this.ttlMs };
          if (generation === this.generation) {
            if (this.tokens.size >= maxCachedTokens) this.tokens.delete(this.tokens.keys().next().value!);
            this.tokens.set(id, cached);
          }
          return cached;
        })
        .finally(() => {
          if (this.tokenReads.get(id) === read) this.tokenReads.delete(id);
        });
      this.tokenReads.set(id, read);
    }
    return read;
  }

  /** True when app `name` is registered (as of at most ttlMs ago). */
  async registered(name: string): Promise<boolean> {
    return (await this.appIndex()).names.has(name);
  }

  /** The apps of a caller that is not a viewer (a viewer's are its grants). */
  private async appsOf(role: TokenRecord["role"], user: string): Promise<ReadonlySet<string>> {
    if (role !== "user") return noApps;
    return (await this.appIndex()).byMaintainer.get(user) ?? noApps;
  }

  /** Every registered app, and maintainer e-mail -> the apps listing it. */
  private async appIndex(): Promise<AppIndex> {
    const now = this.clock.now();
    if (this.apps !== undefined && this.apps.until > now) return this.apps.value;
    if (this.appsRead === undefined) {
      const generation = this.generation;
      const read = this.store
        .list(appsPrefix)
        .then(({ items }) => {
          const index: AppIndex = { names: new Set(), byMaintainer: new Map() };
          for (const kv of items) {
            const app = decodeRecord(AppRecord, kv.key, kv.value);
            index.names.add(app.appname);
            for (const user of app.maintainers) {
              let set = index.byMaintainer.get(user);
              if (set === undefined) index.byMaintainer.set(user, (set = new Set()));
              set.add(app.appname);
            }
          }
          if (generation === this.generation) this.apps = { value: index, until: now + this.ttlMs };
          return index;
        })
        .finally(() => {
          if (this.appsRead === read) this.appsRead = undefined;
        });
      this.appsRead = read;
    }
    return this.appsRead;
  }
}
