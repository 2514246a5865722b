// Token lifetimes: "90s", "30m", "24h", "7d". One unit, a whole number, at most 10 years.
const unitMs = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export const maxLifetimeMs = 3650 * unitMs.d;

/** Milliseconds, or null when `text` is not a lifetime this accepts. */
export function parseLifetime(text: string): number | null {
  const m = /^([1-9][0-9]{0,6})(s|m|h|d)$/.exec(text);
  if (!m) return null;
  const ms = Number(m[1]) * unitMs[m[2] as keyof typeof unitMs];
  return ms <= maxLifetimeMs ? ms : null;
}
