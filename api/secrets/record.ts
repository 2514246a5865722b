// A secret record (docs/secrets.md, "Input rules": path, content, owner, group, mode) and its storage:
//   /platform/secrets/<app>/<proc>/<encodeURIComponent(path)>  = encrypt(AAD, plaintext)
// The path is one encoded key segment, so "/" in it never nests; it is the file's one spelling
// (api/resources/secret-path.ts: `conf/a` for /platform/app/conf/a, while `/conf/a` is another
// file). Records stored before that rule may sit under `/platform/app/conf/a`: read.ts's
// onePerFile shows them as `conf/a`. The plaintext is one JSON header line
// followed by the raw content bytes: content is not JSON-escaped, so a 1 MiB file stays about
// 1 MiB (etcd refuses requests over 1.5 MiB by default; escaping control characters could
// sextuple the size).
export const secretsPrefix = "/platform/secrets/";
export const sysPrefix = `${secretsPrefix}_sys/`;

export const sysKeys = {
  config: `${sysPrefix}config`,
  keycheck: `${sysPrefix}keycheck`,
  rootTokenHash: `${sysPrefix}root-token-hash`,
} as const;

export interface SecretRecord {
  content: string;
  owner: string;
  group: string;
  /** Octal, 3 or 4 digits ("400", "0640"). */
  mode: string;
}

/** The record's address as AES-GCM associated data. NUL cannot occur in app, proc or path. */
export const aadOf = (app: string, proc: string, path: string) => `${app}\0${proc}\0${path}`;

export const appSecretsPrefix = (app: string) => `${secretsPrefix}${app}/`;
export const procSecretsPrefix = (app: string, proc: string) => `${secretsPrefix}${app}/${proc}/`;
export const secretKey = (app: string, proc: string, path: string) => `${procSecretsPrefix(app, proc)}${encodeURIComponent(path)}`;

/** The address of a secret key, or null for a key that is not one (the _sys keys, stray keys). */
export function parseSecretKey(key: string): { app: string; proc: string; path: string } | null {
  if (!key.startsWith(secretsPrefix) || key.startsWith(sysPrefix)) return null;
  const parts = key.slice(secretsPrefix.length).split("/");
  if (parts.length !== 3 || parts.some((p) => p === "")) return null;
  try {
    return { app: parts[0]!, proc: parts[1]!, path: decodeURIComponent(parts[2]!) };
  } catch {
    return null;
  }
}

/**
 * The plaintext as its two parts, header line and content, which encrypt() takes in turn: the
 * content (up to 1 MiB) is not copied into a joined buffer first.
 */
export function encodePlaintext(record: SecretRecord, updatedAt: string): [Buffer, Buffer] {
  const header = JSON.stringify({ owner: record.owner, group: record.group, mode: record.mode, updatedAt });
  return [Buffer.from(`${header}\n`, "utf8"), Buffer.from(record.content, "utf8")];
}

export function decodePlaintext(plaintext: Buffer): SecretRecord & { updatedAt: string } {
  const newline = plaintext.indexOf(0x0a);
  if (newline < 0) throw new Error("secret plaintext has no header");
  const header = JSON.parse(plaintext.subarray(0, newline).toString("utf8")) as { owner: string; group: string; mode: string; updatedAt: string };
  return { owner: header.owner, group: header.group, mode: header.mode, updatedAt: header.updatedAt, content: plaintext.subarray(newline + 1).toString("utf8") };
}
