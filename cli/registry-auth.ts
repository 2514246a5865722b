// The registry's token auth settings at run time (docs/registry.md, "Running the registry"): from
// the config's auth.token, or from the store key the console writes (watched, so a change takes
// effect without a restart), and the certificate bundle file (re-read when it changes).
import { readFileSync, unwatchFile, watchFile } from "node:fs";
import type { Store } from "../adapters/store/store.ts";
import { registryAuthConfigKey } from "../api/resources/registry-auth.ts";
import type { TokenAuthConfig } from "../api/registry/config.ts";
import type { TokenAuthSettings } from "../api/registry/token-auth.ts";
import { realClock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/log.ts";
import { untilAborted } from "../runtime/aborted.ts";
import type { Runnable } from "../runtime/manager.ts";
import { UsageError } from "./options.ts";


interface RealmIssuerService {
  realm: string;
  issuer: string;
  service: string;
}

/**
 * What tokenAuthorizer asks on every request. From the config: auth.token's realm, issuer and
 * service when all are given. From the store: the key's, watched (re-read after a broken watch).
 * The bundle: the file's current text; "" (every token refused, fail closed) when it is not
 * readable while token auth is on.
 */
export class RegistryAuthSettings implements Runnable {
  readonly name = "registry-auth-settings";
  private fromStore: RealmIssuerService | undefined;
  private revision = 0;
  private lastState = "";
  private warnedNoBundle = false;

  constructor(
    private readonly o: {
      from: "store" | "config";
      store: Store;
      config: TokenAuthConfig | undefined;
      bundle: CertBundleFile | undefined;
      log: Logger;
      retryMs?: number;
      /** Token auth may be off (every request allowed): only on a loopback listener. */
      openAllowed: boolean;
      /** The listen address, for messages. */
      web: string;
    },
  ) {}

  /** The first read, before the registry serves: the bundle (required now with config auth) and the store key. */
  async init(configFile: string): Promise<void> {
    const { config, bundle, log } = this.o;
    if (this.o.from === "config") {
      if (config && config.realm !== undefined && bundle) {
        const problem = bundle.load();
        if (problem) throw new UsageError(`${configFile}: auth.token.rootcertbundle: ${problem}`);
        log.info({ realm: config.realm, issuer: config.issuer, service: config.service, rootCertBundle: bundle.path }, "registry token auth on (config auth.token)");
      } else {
        const why = config ? "auth.token has no realm, issuer and service, and without -store no store key provides them" : "the config has no auth.token";
        if (!this.o.openAllowed) {
          throw new UsageError(
            `${configFile}: no token auth (${why}), and the registry listens on ${this.o.web}, which other machines can reach: ` +
              "configure auth.token (realm, issuer, service, rootcertbundle) or run with -store and a console, or listen on 127.0.0.1",
          );
        }
        log.warn(`registry token auth off: ${why}; every request is allowed (loopback listener only)`);
      }
      return;
    }
    const problem = bundle?.load();
    if (problem) log.warn({ file: bundle!.path }, `registry token certificate bundle not readable yet: ${problem}`);
    if (config?.realm !== undefined) {
      log.info({ key: registryAuthConfigKey }, "the config's auth.token realm, issuer and service are not used: the store key decides token auth (-store)");
    }
    await this.read();
  }

  current(): TokenAuthSettings | undefined {
    const ris =
      this.o.from === "store"
        ? this.fromStore
        : this.o.config?.realm !== undefined
          ? { realm: this.o.config.realm, issuer: this.o.config.issuer!, service: this.o.config.service! }
          : undefined;
    // Off on a listener other machines reach (the store key missing or broken): refuse every token
    // rather than allow every request.
    if (!ris) return this.o.openAllowed ? undefined : { realm: "", issuer: "", service: "", rootCertBundle: "" };
    const pem = this.o.bundle?.text;
    if (pem === undefined && !this.warnedNoBundle) {
      this.warnedNoBundle = true;
      this.o.log.error(
        { file: this.o.bundle?.path },
        this.o.bundle ? "registry token auth is on but its certificate bundle is not readable: every token is refused" : "registry token auth is on but the config has no auth.token.rootcertbundle: every token is refused",
      );
    }
    if (pem !== undefined) this.warnedNoBundle = false;
    return { ...ris, rootCertBundle: pem ?? "" };
  }

  async start(signal: AbortSignal): Promise<void> {
    this.o.bundle?.watch();
    try {
      if (this.o.from === "store") await this.follow(signal);
      else await untilAborted(signal);
    } finally {
      this.o.bundle?.unwatch();
    }
  }

  private async follow(signal: AbortSignal): Promise<void> {
    const retryMs = this.o.retryMs ?? 2_000;
    while (!signal.aborted) {
      let watch: { close(): Promise<void> } | undefined;
      const ended = new Promise<Error>((resolveEnded) => {
        watch = this.o.store.watch(registryAuthConfigKey, this.revision + 1, {
          onEvents: (events) => {
            for (const ev of events) {
              this.revision = Math.max(this.revision, ev.kv.modRevision);
              if (ev.kv.key === registryAuthConfigKey) this.apply(ev.type === "put" ? ev.kv.value : undefined);
            }
          },
          onProgress: (revision) => {
            this.revision = Math.max(this.revision, revision);
          },
          onError: resolveEnded,
        });
      });
      const err = await Promise.race([ended, untilAborted(signal).then(() => undefined)]);
      await watch?.close().catch(() => {});
      if (err === undefined || signal.aborted) return;
      this.o.log.warn({ err, key: registryAuthConfigKey }, "watch of the registry auth key ended; reading the key again");
      while (!signal.aborted) {
        await realClock.sleep(retryMs, signal).catch(() => {});
        if (signal.aborted) return;
        try {
          await this.read();
          break;
        } catch (e) {
          this.o.log.warn({ err: e, key: registryAuthConfigKey }, "reading the registry auth key failed; retrying");
        }
      }
    }
  }

  /** Read the key and the revision it was read at. */
  private async read(): Promise<void> {
    const page = await this.o.store.list(registryAuthConfigKey, { limit: 1 });
    const kv = page.items[0];
    this.revision = page.revision;
    this.apply(kv?.key === registryAuthConfigKey ? kv.value : undefined);
  }

  private apply(value: string | undefined): void {
    const { log } = this.o;
    let next: RealmIssuerService | undefined;
    let why = "";
    if (value === undefined) why = `the store key ${registryAuthConfigKey} is absent`;
    else {
      try {
        const v = JSON.parse(value) as Record<string, unknown>;
        const ok = (x: unknown): x is string => typeof x === "string" && x !== "";
        if (v && ok(v.realm) && ok(v.issuer) && ok(v.service)) next = { realm: v.realm, issuer: v.issuer, service: v.service };
        else why = `the store key ${registryAuthConfigKey} does not hold non-empty realm, issuer and service`;
      } catch {
        why = `the store key ${registryAuthConfigKey} is not JSON`;
      }
    }
    this.fromStore = next;
    const state = next ? JSON.stringify(next) : `off:${why}`;
    if (state === this.lastState) return;
    const first = this.lastState === "";
    this.lastState = state;
    if (next) log.info({ ...next, key: registryAuthConfigKey }, "registry token auth on (store key)");
    else if (!this.o.openAllowed) log.error({ key: registryAuthConfigKey, address: this.o.web }, `registry token auth has no settings: ${why}; every request is refused (the listener is not loopback)`);
    else if (first && value === undefined) log.warn({ key: registryAuthConfigKey }, `registry token auth off: ${why}; every request is allowed`);
    else log.warn({ key: registryAuthConfigKey }, `registry token auth off: ${why}; every request is allowed from now on`);
  }
}

/** The PEM text of a certificate bundle file, re-read when the file changes. Keeps the last good text. */
export class CertBundleFile {
  text: string | undefined;
  private watching = false;

  constructor(
    readonly path: string,
    private readonly log: Logger,
  ) {}

  /** Read now; answers what is wrong, or undefined. */
  load(): string | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (e) {
      return `${this.path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
    }
    if (!text.includes("-----BEGIN CERTIFICATE-----")) return `${this.path}: not a PEM file with a CERTIFICATE`;
    this.text = text;
    return undefined;
  }

  watch(): void {
    if (this.watching) return;
    this.watching = true;
    watchFile(this.path, { interval: 1_000, persistent: false }, (cur, prev) => {
      if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
      const before = this.text;
      const problem = this.load();
      if (problem) this.log.error({ file: this.path }, `registry token certificate bundle changed and is not usable (${problem}); keeping the last one read`);
      else if (this.text !== before) this.log.info({ file: this.path }, "registry token certificate bundle re-read");
    });
  }

  unwatch(): void {
    if (!this.watching) return;
    this.watching = false;
    unwatchFile(this.path);
  }
}
