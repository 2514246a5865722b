// The CPU figures /proc gives about the machine and about this process's finished children (the
// load generators).
import { readFile } from "node:fs/promises";

/** Jiffies (1/100 s) the whole machine spent busy and in total so far (/proc/stat, first line). */
export async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await readFile("/proc/stat", "utf8")).split("\n", 1)[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const total = v.slice(0, 8).reduce((s, x) => s + x, 0);
  const idle = v[3]! + v[4]!;
  return { busy: total - idle, total };
}

/**
 * CPU seconds of this process's children that have exited and been waited for (/proc/self/stat
 * cutime + cstime): across one wrk or open-loop run, that run's own CPU.
 */
export async function finishedChildrenCpuSeconds(): Promise<number> {
  const stat = await readFile("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[13]) + Number(fields[14])) / 100;
}
