// Tables for `capstan get depends`: the dependency's line, then one row per pod (node and
// namespace), in the style of cli/render.ts.
import type { DependencyPodStatus, DependencyWithStatus } from "../api/resources/dependency.ts";
import { table } from "./render.ts";

/** "3/4": pods running at the spec's version, of all pods. */
function pods(d: DependencyWithStatus): string {
  return `${d.pods.filter((p) => p.state === "running" && p.version === d.spec.version).length}/${d.pods.length}`;
}

/** "(all)" for a node-level pod, shared by every namespace on its node. */
function scope(p: DependencyPodStatus): string {
  return p.namespace === "" ? "(all)" : p.namespace;
}

/** `get depends NAME`. */
export function renderDependency(d: DependencyWithStatus): string {
  const head = table(["DEPENDENCY", "STATE", "PODS", "VERSION", "LAST ERROR"], [[d.spec.name, d.state, pods(d), String(d.spec.version), d.lastError]]);
  if (d.pods.length === 0) return `${head}\nno pods (deployed on demand, next to the PodGroup instances that list it)\n`;
  const rows = d.pods.map((p) => [
    p.node,
    scope(p),
    p.state,
    String(p.refCount),
    String(p.version),
    String(p.restartCount),
    p.reclaimAt ?? "",
    p.containers.map((c) => `${c.name} ${c.status}`).join(", "),
    p.lastError,
  ]);
  return `${head}\n${table(["NODE", "NAMESPACE", "STATE", "REFS", "VERSION", "RESTARTS", "RECLAIM AT", "CONTAINERS", "LAST ERROR"], rows)}`;
}

/** `get depends`: one row per dependency. */
export function renderDependencyList(list: DependencyWithStatus[]): string {
  if (list.length === 0) return "no dependencies\n";
  const rows = list.map((d) => [d.spec.name, d.state, pods(d), String(d.spec.version), String(d.pods.reduce((n, p) => n + p.refCount, 0)), d.lastError]);
  return table(["NAME", "STATE", "PODS", "VERSION", "REFS", "LAST ERROR"], rows);
}
