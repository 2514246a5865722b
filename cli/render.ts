// Tables for `capstan get`, in the style of kubectl and docker ps: upper-case headers, columns
// padded to their widest cell and separated by at least two spaces, "-" for an empty cell. Cells
// are kept to one line (a multi-line error would break the columns).
import type { ContainerStatus, PodGroupWithSpec } from "../api/resources/podgroup.ts";

/** Aligned columns; the last column is not padded (no trailing blanks). */
export function table(headers: string[], rows: string[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(cell))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")
    .concat("\n");
}

function cell(text: string): string {
  const one = text.replace(/\s*\n\s*/g, " ").trim();
  return one === "" ? "-" : one;
}

/** "2/3": pods running at the spec's version, of the instances asked for. */
function instances(g: PodGroupWithSpec): string {
  const running = g.pods.filter((p) => p.state === "running" && p.version === g.spec.pod.version).length;
  return `${running}/${g.spec.numInstances}`;
}

/** `get podgroup NAME`: the group's line, then one row per instance. */
export function renderPodGroup(g: PodGroupWithSpec): string {
  const head = table(
    ["PODGROUP", "NAMESPACE", "STATE", "INSTANCES", "VERSION", "RESTART", "LAST ERROR"],
    [[g.spec.name, g.spec.namespace, g.state, instances(g), String(g.spec.pod.version), g.spec.restartPolicy, g.lastError]],
  );
  // The last rolling restart asked for (capstan restart), when there was one.
  const restarted = g.spec.restartedAt === undefined ? "" : `rolling restart requested at ${g.spec.restartedAt}\n`;
  if (g.pods.length === 0) return `${head}${restarted}\nno instances\n`;
  const pods = [...g.pods].sort((a, b) => a.instanceNo - b.instanceNo);
  const rows = pods.map((p) => [
    String(p.instanceNo),
    p.state,
    p.node,
    String(p.version),
    String(p.restartCount),
    p.containers.map(containerStatus).join(", "),
    p.lastError,
  ]);
  return `${head}${restarted}\n${table(["INSTANCE", "STATE", "NODE", "VERSION", "RESTARTS", "CONTAINERS", "LAST ERROR"], rows)}`;
}

/** `get podgroups`: one row per group. */
export function renderPodGroupList(groups: PodGroupWithSpec[]): string {
  if (groups.length === 0) return "no podgroups\n";
  const rows = groups.map((g) => [
    g.spec.name,
    g.spec.namespace,
    g.state,
    instances(g),
    String(g.spec.pod.version),
    g.spec.restartPolicy,
    g.lastError,
  ]);
  return table(["NAME", "NAMESPACE", "STATE", "INSTANCES", "VERSION", "RESTART", "LAST ERROR"], rows);
}

/** "hello.v1-i1-d0 running", "hello.v1-i2-d0 exited(3)". */
function containerStatus(c: ContainerStatus): string {
  const exit = c.exitCode !== undefined && c.status !== "running" ? `(${c.exitCode})` : "";
  return `${c.name} ${c.status}${exit}`;
}
