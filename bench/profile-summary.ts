// Summarises V8 CPU profiles (.cpuprofile, as `node --cpu-prof` writes them, e.g. with
// BENCH_ORCHESTRATOR_PROFILE=DIR): where the process's CPU went, without a browser.
//
//   npx tsx bench/profile-summary.ts FILE.cpuprofile [--top N] [--from S] [--to S] [--match TEXT]
//
// Prints the top functions by self time and by inclusive time (the function or anything it called;
// a recursive function counts once per sample), both keyed by function name + file:line, then self
// time by package or source file, and the busy time per second of the profile (to find the phases
// of a run: start-up, warm-up, measured load). --from/--to restrict it to that many seconds from
// the profile's start; --match prints, for the functions whose name or file contains TEXT, who
// calls them (the parents' self+inclusive share).
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { parseArgs } from "node:util";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    top: { type: "string", default: "25" },
    from: { type: "string" },
    to: { type: "string" },
    match: { type: "string" },
  },
});
if (positionals.length === 0) {
  console.error("usage: npx tsx bench/profile-summary.ts FILE.cpuprofile [--top N] [--from S] [--to S] [--match TEXT]");
  process.exit(2);
}
const top = Number(values.top);
// `... | head` closes the pipe early: stop quietly.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});
const cwd = process.cwd();

/** "file:line" relative to the working directory; node_modules paths shortened to the package. */
function where(url: string, line: number): string {
  if (url === "") return "";
  const path = url.startsWith("file://") ? decodeURIComponent(url.slice("file://".length)) : url;
  const nm = path.lastIndexOf("/node_modules/");
  const short = nm >= 0 ? path.slice(nm + 1) : path.startsWith("/") ? relative(cwd, path) : path;
  return `${short}:${line + 1}`;
}

/** The package (node_modules/<name>) or source file a frame belongs to; V8's own entries as named. */
function moduleOf(frame: CallFrame): string {
  if (frame.url === "") return frame.functionName.startsWith("(") ? frame.functionName : "(native)";
  if (frame.url.startsWith("node:")) return "node: (built-ins)";
  const path = frame.url.startsWith("file://") ? decodeURIComponent(frame.url.slice("file://".length)) : frame.url;
  const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (m) return `node_modules/${m[1]}`;
  return path.startsWith("/") ? relative(cwd, path) : path;
}

const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
const pct = (us: number, total: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;

function summarise(file: string): void {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of profile.nodes) byId.set(n.id, n);
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const keyOf = (f: CallFrame) => `${f.functionName || "(anonymous)"}  ${where(f.url, f.lineNumber)}`.trimEnd();
  // Per node: its key, and the distinct keys on its stack (itself and every ancestor).
  const stackKeys = new Map<number, string[]>();
  const stackOf = (id: number): string[] => {
    const hit = stackKeys.get(id);
    if (hit) return hit;
    const path: number[] = [];
    for (let n: number | undefined = id; n !== undefined && !stackKeys.has(n); n = parent.get(n)) path.push(n);
    for (const n of path.reverse()) {
      const p = parent.get(n);
      const above = p === undefined ? [] : stackKeys.get(p)!;
      const k = keyOf(byId.get(n)!.callFrame);
      stackKeys.set(n, above.includes(k) ? above : [...above, k]);
    }
    return stackKeys.get(id)!;
  };

  const from = values.from === undefined ? 0 : Number(values.from) * 1e6;
  const to = values.to === undefined ? Infinity : Number(values.to) * 1e6;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const modules = new Map<string, number>();
  const perSecond: number[] = [];
  // Callers of --match functions: parent key -> time.
  const callers = new Map<string, Map<string, number>>();
  let total = 0;
  let idle = 0;
  let t = profile.startTime;
  const n = profile.samples.length;
  const meanDelta = (profile.endTime - profile.startTime) / Math.max(1, n);
  for (let i = 0; i < n; i++) {
    t += profile.timeDeltas[i]!;
    const at = t - profile.startTime;
    if (at < from || at > to) continue;
    // A sample stands for the time until the next one.
    const dt = i + 1 < n ? Math.max(0, profile.timeDeltas[i + 1]!) : meanDelta;
    const node = byId.get(profile.samples[i]!)!;
    const frame = node.callFrame;
    total += dt;
    if (frame.functionName === "(idle)") {
      idle += dt;
      continue;
    }
    const second = Math.floor(at / 1e6);
    perSecond[second] = (perSecond[second] ?? 0) + dt;
    const k = keyOf(frame);
    self.set(k, (self.get(k) ?? 0) + dt);
    const mod = moduleOf(frame);
    modules.set(mod, (modules.get(mod) ?? 0) + dt);
    for (const s of stackOf(node.id)) inclusive.set(s, (inclusive.get(s) ?? 0) + dt);
    if (values.match !== undefined) {
      // The nearest frame on the stack that matches, and the frame that called it.
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const f = byId.get(id)!.callFrame;
        if (!keyOf(f).includes(values.match)) continue;
        const p = parent.get(id);
        const caller = p === undefined ? "(root)" : keyOf(byId.get(p)!.callFrame);
        const m = callers.get(keyOf(f)) ?? new Map<string, number>();
        m.set(caller, (m.get(caller) ?? 0) + dt);
        callers.set(keyOf(f), m);
        break;
      }
    }
  }
  const busy = total - idle;
  const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  console.log(`\n== ${file}`);
  console.log(`${(total / 1e6).toFixed(2)} s profiled, ${(busy / 1e6).toFixed(2)} s busy (not idle), ${n} samples`);
  console.log(`\ntop ${top} by self time (ms, % of busy)`);
  for (const [k, v] of sorted(self).slice(0, top)) console.log(`${ms(v)} ${pct(v, busy)}  ${k}`);
  console.log(`\ntop ${top} by inclusive time (ms, % of busy)`);
  for (const [k, v] of sorted(inclusive).slice(0, top)) console.log(`${ms(v)} ${pct(v, busy)}  ${k}`);
  console.log(`\nself time by package / file (ms, % of busy)`);
  for (const [k, v] of sorted(modules).slice(0, top)) console.log(`${ms(v)} ${pct(v, busy)}  ${k}`);
  console.log(`\nbusy ms per second of the profile`);
  console.log(perSecond.map((v, s) => `${s}:${((v ?? 0) / 1000).toFixed(0)}`).join(" "));
  for (const [k, m] of callers) {
    const sum = [...m.values()].reduce((a, b) => a + b, 0);
    console.log(`\ncalls of ${k} (${(sum / 1000).toFixed(0)} ms under it, innermost match), by caller`);
    for (const [c, v] of sorted(m).slice(0, 10)) console.log(`${ms(v)} ${pct(v, busy)}  ${c}`);
  }
}

for (const file of positionals) summarise(file);
