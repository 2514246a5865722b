// What /proc says about a process under test: CPU used so far (benches turn differences into CPU
// per request or per run). Linux only, as the benches are.
import { readFile } from "node:fs/promises";

/** Linux reports process CPU in clock ticks; USER_HZ is 100 on every architecture Node runs on. */
const ticksPerSecond = 100;

/** User + system CPU seconds of a process (/proc/<pid>/stat utime + stime). */
export async function cpuSecondsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name (which may itself hold spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}
