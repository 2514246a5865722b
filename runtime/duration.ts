// Durations as operators write them: "500ms", "10s", "5m", "1h", "1m30s". A bare number is refused
// (is "10" seconds or milliseconds?), so a typo never silently becomes a 10 ms timeout.

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === "0") return 0;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    PART.lastIndex = at;
    const m = PART.exec(s);
    if (!m) throw new Error(`invalid duration "${text}": use a number with a unit, e.g. 500ms, 10s, 5m, 1h`);
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    at = PART.lastIndex;
  }
  if (s.length === 0) throw new Error("invalid duration \"\": empty");
  return Math.round(total);
}

export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0 && ms > 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}
