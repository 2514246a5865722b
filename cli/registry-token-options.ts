// The console's registry token options (docs/registry.md, "Token authentication"):
//
//   -registry-cert FILE          write the signing certificate (PEM) here for the registry's
//                                rootcertbundle, and publish {realm, issuer, service} at
//                                /platform/config/auth/registry
//   -registry-realm URL          where the registry sends clients (default: this console's URL +
//                                /api/v1/authorize/registry/)
//   -registry-issuer NAME        `iss` of the tokens (default capstan-console)
//   -registry-service NAME       `aud` of the tokens, the registry's service name (default capstan-registry)
//   -registry-anonymous-pull     callers without credentials may pull every repository (default off)
//   -registry-token-ttl DURATION token lifetime (default 5m, at least 60s)
//
// The token endpoint is always served; the signing key is made on the first start (in the store).
import { randomBytes } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import {
  defaultRegistryIssuer,
  defaultRegistryService,
  defaultRegistryTokenTtlSeconds,
  ensureRegistrySigningKey,
  minRegistryTokenTtlSeconds,
  publishRegistryAuthConfig,
  registryTokenPath,
  type RegistryTokenApiOptions,
} from "../api/console/registry-token.ts";
import { parseListenAddress } from "./listen.ts";
import { UsageError, type OptionDef } from "./options.ts";
import type { ServeContext } from "./serve.ts";

export const registryTokenOptionDefs: OptionDef[] = [
  { name: "registry-cert", type: "string", help: "write the registry token signing certificate (PEM) here for the registry's rootcertbundle, and publish {realm, issuer, service} at /platform/config/auth/registry" },
  { name: "registry-realm", type: "string", help: "registry token endpoint URL the registry sends clients to (default: this console's URL + /api/v1/authorize/registry/)" },
  { name: "registry-issuer", type: "string", help: "issuer (iss) of registry tokens", default: defaultRegistryIssuer },
  { name: "registry-service", type: "string", help: "the registry's service name (aud of registry tokens)", default: defaultRegistryService },
  { name: "registry-anonymous-pull", type: "bool", help: "let callers without credentials pull every repository", default: false },
  { name: "registry-token-ttl", type: "duration", help: "lifetime of registry tokens (at least 60s)", default: "5m" },
];

export interface RegistryTokenSettings {
  certFile?: string;
  /** Undefined when it cannot be derived (no -web): then -registry-cert needs -registry-realm. */
  realm?: string;
  issuer: string;
  service: string;
  anonymousPull: boolean;
  ttlSeconds: number;
}

/** A name that goes into a quoted header parameter and a JWT claim: printable ASCII, no quote or backslash. */
function checkName(option: string, value: string): string {
  if (!/^[\x21-\x7e]+$/.test(value) || /["\\]/.test(value)) throw new UsageError(`-${option}: "${value}" must be printable ASCII without spaces, quotes or backslashes`);
  return value;
}

/** This console's own URL from -web and -tls-cert: every-interface listeners are named by the host name. */
function ownUrl(options: Record<string, unknown>): string | undefined {
  if (typeof options.web !== "string") return undefined;
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(options.web);
  } catch {
    return undefined;
  }
  const scheme = typeof options["tls-cert"] === "string" && options["tls-cert"] !== "" ? "https" : "http";
  const host = listen.host === "0.0.0.0" || listen.host === "::" ? hostname() : listen.host;
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${listen.port}`;
}

export function registryTokenSettings(options: Record<string, unknown>): RegistryTokenSettings {
  const str = (name: string) => (typeof options[name] === "string" && options[name] !== "" ? (options[name] as string) : undefined);
  let realm = str("registry-realm");
  if (realm !== undefined) {
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new UsageError(`-registry-realm: "${realm}" is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`-registry-realm: "${realm}" is not an http or https URL`);
    if (/["\\\s]/.test(realm)) throw new UsageError(`-registry-realm: "${realm}" must not hold quotes, backslashes or spaces`);
  } else {
    const own = ownUrl(options);
    realm = own === undefined ? undefined : own + registryTokenPath;
  }
  const ttlMs = typeof options["registry-token-ttl"] === "number" ? options["registry-token-ttl"] : defaultRegistryTokenTtlSeconds * 1000;
  if (ttlMs < minRegistryTokenTtlSeconds * 1000) throw new UsageError(`-registry-token-ttl: must be at least ${minRegistryTokenTtlSeconds}s (distribution's token spec)`);
  const certFile = str("registry-cert");
  return {
    ...(certFile !== undefined ? { certFile } : {}),
    ...(realm !== undefined ? { realm } : {}),
    issuer: checkName("registry-issuer", str("registry-issuer") ?? defaultRegistryIssuer),
    service: checkName("registry-service", str("registry-service") ?? defaultRegistryService),
    anonymousPull: options["registry-anonymous-pull"] === true,
    ttlSeconds: Math.floor(ttlMs / 1000),
  };
}

/** Write `text` to `path` unless it already holds it; through a temporary file, so a reader never sees half. */
async function writeIfChanged(path: string, text: string): Promise<boolean> {
  try {
    if ((await readFile(path, "utf8")) === text) return false;
  } catch {
    // absent or unreadable: write it
  }
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, path);
  return true;
}

/**
 * The token endpoint's options for this console: the signing key from the store (made on the first
 * start), the certificate written to -registry-cert and {realm, issuer, service} published.
 */
export async function installRegistryToken(
  ctx: Pick<ServeContext, "store" | "log" | "verifier"> & { access: Pick<ServeContext["access"], "gate"> },
  settings: RegistryTokenSettings,
): Promise<RegistryTokenApiOptions> {
  const { store, log } = ctx;
  const { key, created } = await ensureRegistrySigningKey({ store });
  if (created) log.info({ kid: key.kid }, "registry token signing key created");
  if (settings.certFile !== undefined) {
    if (settings.realm === undefined) throw new UsageError("-registry-cert needs -registry-realm (this console's URL is not known)");
    try {
      if (await writeIfChanged(settings.certFile, key.certificatePem)) log.info({ file: settings.certFile, kid: key.kid }, "registry token certificate written");
    } catch (e) {
      throw new UsageError(`-registry-cert ${settings.certFile}: cannot write the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const config = { realm: settings.realm, issuer: settings.issuer, service: settings.service };
    if (await publishRegistryAuthConfig(store, config)) log.info(config, "registry auth settings published at /platform/config/auth/registry");
  }
  if (settings.anonymousPull) log.warn("registry anonymous pull is on (-registry-anonymous-pull): anyone who reaches the registry can pull every image");
  return {
    key,
    verifier: ctx.verifier,
    gate: ctx.access.gate,
    issuer: settings.issuer,
    service: settings.service,
    anonymousPull: settings.anonymousPull,
    ttlSeconds: settings.ttlSeconds,
    log,
  };
}
