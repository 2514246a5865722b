// Every benchmark ends by calling report(): it prints a table of figures and ratios and writes
// bench/results/<bench>.json as {"bench", "figures", "ratios", "targets", "at"} (docs/benchmarks.md).
// A ratio is named for what it divides (e.g. "capstan_over_raw"); a target says which way is good,
// and the file records for each whether it was met.
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface Target {
  /** The ratio (or figure) this target applies to. */
  name: string;
  /** "max": the value must be at most `value`; "min": at least. */
  kind: "max" | "min";
  value: number;
}

export interface BenchReport {
  bench: string;
  figures: Record<string, number>;
  ratios: Record<string, number>;
  targets?: Target[];
  notes?: string[];
}

export function report(r: BenchReport): { met: boolean } {
  const rows: [string, string, string][] = [];
  for (const [k, v] of Object.entries(r.figures)) rows.push(["figure", k, fmt(v)]);
  for (const [k, v] of Object.entries(r.ratios)) rows.push(["ratio", k, fmt(v)]);
  let met = true;
  const verdicts: string[] = [];
  const targets: (Target & { met: boolean })[] = [];
  for (const t of r.targets ?? []) {
    const v = r.ratios[t.name] ?? r.figures[t.name];
    const ok = v !== undefined && (t.kind === "max" ? v <= t.value : v >= t.value);
    met &&= ok;
    targets.push({ ...t, met: ok });
    verdicts.push(`${ok ? "MET " : "MISS"} ${t.name} ${t.kind === "max" ? "<=" : ">="} ${t.value} (got ${v === undefined ? "nothing" : fmt(v)})`);
  }
  const w = Math.max(...rows.map((x) => x[1].length), 10);
  console.log(`\n== bench ${r.bench}`);
  for (const [kind, k, v] of rows) console.log(`${kind.padEnd(7)} ${k.padEnd(w)} ${v}`);
  for (const v of verdicts) console.log(`target  ${v}`);
  for (const n of r.notes ?? []) console.log(`note    ${n}`);
  const dir = fileURLToPath(new URL("../results/", import.meta.url));
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}${r.bench}.json`, JSON.stringify({ ...r, ...(r.targets ? { targets } : {}), met, at: new Date().toISOString() }, null, 2) + "\n");
  return { met };
}

function fmt(v: number): string {
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4);
}

/** Percentile (0..100) of a list of numbers, nearest-rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
