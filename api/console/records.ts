// The console's stored records and their keys (docs/store.md, the key layout; docs/console.md, "Decisions"):
//   /platform/console/apps/<app>   = AppRecord
//   /platform/console/tokens/<id>  = TokenRecord (the hash of the secret part, never the token)
// Names and e-mails are validated here, once, for the API and for ensureAdminToken alike.
import { z } from "zod";
import { maxMaintainers } from "./maintainers.ts";

export const consolePrefix = "/platform/console/";
export const appsPrefix = `${consolePrefix}apps/`;
export const tokensPrefix = `${consolePrefix}tokens/`;
export const appKey = (app: string) => `${appsPrefix}${app}`;
export const tokenKey = (id: string) => `${tokensPrefix}${id}`;

/**
 * An app name: a DNS label (lower-case letters, digits, inner hyphens, at most 63 characters). It is
 * a store key segment, the first segment of every proc name `<app>.<type>.<proc>`, and a Docker
 * name part, so it may hold neither "/" nor "." nor "_".
 */
export const appNamePattern = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const AppName = z.string().regex(appNamePattern, "must be a lower-case DNS label: a-z, 0-9 and inner '-', at most 63 characters");

/** An e-mail address, lower-cased (e-mail matching is case-insensitive in practice). */
export const Email = z
  .string()
  .max(254, "must be at most 254 characters")
  .transform((s) => s.trim().toLowerCase())
  .pipe(z.string().regex(/^[^\s@"<>()[\]\\,;:]+@[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/, "must be an e-mail address"));

export const Maintainers = z
  .array(Email)
  .min(1, "must list at least one maintainer")
  .max(maxMaintainers, `must list at most ${maxMaintainers} maintainers`)
  .transform((list) => [...new Set(list)]);

/**
 * Token roles (docs/security.md, "Roles"): admin, everything; user, a person, maintainer of the apps
 * whose maintainers list their e-mail; viewer, read-only on the apps granted on the token; sync,
 * the read-only service identity (secrets of every app, for Secret-sync).
 */
export const Role = z.enum(["user", "viewer", "sync", "admin"]);
export type Role = z.infer<typeof Role>;

export const AppRecord = z.object({
  appname: AppName,
  maintainers: z.array(z.string()),
  createdAt: z.string(),
});
export type AppRecord = z.infer<typeof AppRecord>;

export const TokenRecord = z.object({
  id: z.string(),
  user: z.string(),
  role: Role,
  hash: z.string(),
  createdAt: z.string(),
  expiresAt: z.string().optional(),
  /** A viewer token's grants: the apps it may read. */
  apps: z.array(z.string()).optional(),
  /** How it was made when not by POST /api/v1/tokens: "sso", a single sign-on login (sso.ts). */
  origin: z.string().optional(),
});
export type TokenRecord = z.infer<typeof TokenRecord>;

/** A stored value that does not parse is a bug or tampering, never the caller's fault. */
export class CorruptRecordError extends Error {
  override readonly name = "CorruptRecordError";
  constructor(key: string) {
    super(`stored record at ${key} is malformed`);
  }
}

export function decodeRecord<S extends z.ZodType>(schema: S, key: string, value: string): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch {
    throw new CorruptRecordError(key);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new CorruptRecordError(key);
  return parsed.data;
}
