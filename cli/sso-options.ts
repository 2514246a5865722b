// The console's single sign-on options (docs/console.md#single-sign-on), for `capstan console` and
// `capstan up`:
//
//   -oidc-issuer URL               the OpenID provider (https://, or http:// on loopback only); SSO is off without it
//   -oidc-client-id ID             the console's client id at the provider
//   -oidc-client-secret-file FILE  the client secret (or CAPSTAN_OIDC_CLIENT_SECRET); never on the command line
//   -oidc-admins a@x,b@y           e-mails that log in as admin (everyone else: role user)
//   -sso-token-ttl DURATION        lifetime of the access tokens an SSO login makes (default 12h)
import { readFileSync, statSync } from "node:fs";
import { defaultSsoTokenTtlMs, type SsoSettings } from "../api/console/sso.ts";
import { maxLifetimeMs } from "../api/console/duration.ts";
import { Email } from "../api/console/records.ts";
import { isLoopbackHost } from "../runtime/loopback.ts";
import { httpUrlOption, UsageError, type OptionDef, type OptionValues } from "./options.ts";

export const ssoOptionNames = ["oidc-issuer", "oidc-client-id", "oidc-client-secret-file", "oidc-admins", "sso-token-ttl"] as const;

export const ssoOptionDefs: OptionDef[] = [
  { name: "oidc-issuer", type: "string", help: "single sign-on: the OpenID Connect provider (https://, or http:// on loopback only); without it SSO is off" },
  { name: "oidc-client-id", type: "string", help: "single sign-on: the console's client id at the provider" },
  { name: "oidc-client-secret-file", type: "string", help: "single sign-on: file holding the client secret (else CAPSTAN_OIDC_CLIENT_SECRET)" },
  { name: "oidc-admins", type: "string", help: "single sign-on: comma-separated e-mails that log in as admin (everyone else logs in as role user)" },
  { name: "sso-token-ttl", type: "duration", help: "single sign-on: lifetime of the access tokens a login makes", default: "12h" },
];

/** The SSO options of `options` alone (what `capstan up` hands to consoleSettings). */
export function ssoOptionsOf(options: OptionValues): OptionValues {
  const out: OptionValues = {};
  for (const name of ssoOptionNames) if (options[name] !== undefined) out[name] = options[name];
  return out;
}

/** The settings, or undefined when SSO is off (no -oidc-issuer). Reads the secret file. */
export function ssoSettings(options: Record<string, unknown>, env: Record<string, string | undefined> = process.env): (SsoSettings & { secretFile?: string; secretFileReadable?: boolean }) | undefined {
  const str = (name: string) => (typeof options[name] === "string" && (options[name] as string).trim() !== "" ? (options[name] as string).trim() : undefined);
  const issuer = str("oidc-issuer");
  if (issuer === undefined) {
    const stray = ["oidc-client-id", "oidc-client-secret-file", "oidc-admins"].find((n) => str(n) !== undefined);
    if (stray !== undefined) throw new UsageError(`-${stray} needs -oidc-issuer (single sign-on is off without it)`);
    return undefined;
  }
  const u = httpUrlOption("oidc-issuer", issuer);
  if (u.username || u.password || u.search || u.hash) throw new UsageError(`-oidc-issuer: "${issuer}" must not carry a user, password, query or fragment`);
  if (u.protocol === "http:" && !isLoopbackHost(u.hostname)) {
    throw new UsageError(`-oidc-issuer: "${issuer}" is plain http to another machine: codes, tokens and keys would cross the network unprotected; use https://`);
  }
  const clientId = str("oidc-client-id");
  if (clientId === undefined) throw new UsageError("-oidc-issuer needs -oidc-client-id (the console's client id at the provider)");
  const secretFile = str("oidc-client-secret-file");
  let clientSecret: string;
  let secretFileReadable: boolean | undefined;
  if (secretFile !== undefined) {
    try {
      clientSecret = readFileSync(secretFile, "utf8").trim();
      secretFileReadable = (statSync(secretFile).mode & 0o004) !== 0;
    } catch (e) {
      throw new UsageError(`-oidc-client-secret-file ${secretFile}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    if (clientSecret === "") throw new UsageError(`-oidc-client-secret-file ${secretFile}: the file is empty`);
  } else {
    clientSecret = (env.CAPSTAN_OIDC_CLIENT_SECRET ?? "").trim();
    if (clientSecret === "") throw new UsageError("-oidc-issuer needs the client secret: give -oidc-client-secret-file FILE or CAPSTAN_OIDC_CLIENT_SECRET (never on the command line)");
  }
  const admins: string[] = [];
  for (const raw of (str("oidc-admins") ?? "").split(",")) {
    if (raw.trim() === "") continue;
    const parsed = Email.safeParse(raw);
    if (!parsed.success) throw new UsageError(`-oidc-admins: "${raw.trim()}" is not an e-mail address`);
    admins.push(parsed.data);
  }
  const ttl = typeof options["sso-token-ttl"] === "number" ? options["sso-token-ttl"] : defaultSsoTokenTtlMs;
  if (ttl < 60_000 || ttl > maxLifetimeMs) throw new UsageError("-sso-token-ttl: must be at least 1m and at most 87600h (10 years)");
  return {
    issuer,
    clientId,
    clientSecret,
    admins: [...new Set(admins)],
    tokenTtlMs: ttl,
    ...(secretFile !== undefined ? { secretFile, secretFileReadable } : {}),
  };
}
