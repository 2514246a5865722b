// The file mode of a secret record (docs/secrets.md, "Input rules"): octal, 3 digits or 4 starting
// with 0. A secret file is data installed as root, so the setuid, setgid and sticky bits are never
// meant: the secrets API refuses them, and Secret-sync refuses to install a record stored with them
// before that rule. Shared by api/secrets and controllers/secretsync.

/** Why `mode` is not a secret file mode, or undefined. */
export function secretModeProblem(mode: string): string | undefined {
  if (!/^[0-7]{3,4}$/.test(mode)) return 'must be an octal mode of 3 or 4 digits, like "400" or "0640"';
  if (mode.length === 4 && mode[0] !== "0") return "must not set the setuid, setgid or sticky bits (a 4-digit mode starts with 0)";
  return undefined;
}

/** The mode's permission bits as a number; only for a mode secretModeProblem accepts. */
export const secretModeBits = (mode: string): number => parseInt(mode, 8);
