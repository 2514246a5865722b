// `capstan drift -from A [-to B] [-pg NAME [-instance N]] [-force] [-wait]`: move PodGroup instances
// off a node (PATCH /api/nodes?cmd=drift). With -wait, follows the groups until nothing the drift
// covers is on A any more and no instance is still drifting.
import { firstInstanceNo, instanceNumbersFrom, isCurrentInstance, isStateful, type PodGroupWithSpec } from "../../api/resources/podgroup.ts";
import type { OrchestratorClient } from "../client.ts";
import { ApiError } from "../http-errors.ts";
import { clientOptionDefs, waitOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { formatDuration } from "../../runtime/duration.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "from", type: "string", help: "the node to move instances away from (required)" },
  { name: "to", type: "string", help: "the node to move them to (default: the scheduler picks any node but -from)" },
  { name: "pg", type: "string", help: "only this PodGroup" },
  { name: "instance", type: "int", help: "only this InstanceNo of -pg (from 1)" },
  { name: "force", type: "bool", help: "move stateful PodGroups too (their volumes stay behind on -from)" },
  ...waitOptionDefs.map((d) => (d.name === "wait" ? { ...d, help: "wait until nothing covered is left on -from, showing progress" } : d)),
  ...clientOptionDefs,
];

const help = `${usage("drift", "Moves PodGroup instances off a node: each is removed there and deployed elsewhere. Stateful PodGroups stay unless -force.", defs)}
examples:
  capstan drift -from n1 -wait
  capstan drift -from n1 -to n2 -pg web
  capstan drift -from n1 -pg db -instance 1 -force
`;

export interface DriftScope {
  from: string;
  pg?: string;
  instance?: number;
  force: boolean;
}

/** Pods (`group/instance`) the drift still has to move: on `from`, or drifting. */
export function driftLeft(groups: PodGroupWithSpec[], d: DriftScope): string[] {
  const left: string[] = [];
  for (const g of groups) {
    if (d.pg !== undefined && g.spec.name !== d.pg) continue;
    if (g.spec.deleting || (!d.force && isStateful(g.spec.pod))) continue;
    for (const p of g.pods) {
      if (!isCurrentInstance(p.instanceNo, g.spec.numInstances) || (d.instance !== undefined && p.instanceNo !== d.instance)) continue;
      if (p.node === d.from || p.state === "drifting") left.push(`${g.spec.name}/${p.instanceNo}`);
    }
  }
  return left;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  const o = args.options as { from?: string; to?: string; pg?: string; instance?: number; force?: boolean; wait?: boolean; timeout: number };
  if (!o.from) throw new UsageError("-from NODE is required, e.g. capstan drift -from n1");
  if (o.to !== undefined && o.to === o.from) throw new UsageError(`-to ${o.to} is -from: a drift moves instances to another node`);
  if (o.instance !== undefined && o.pg === undefined) throw new UsageError("-instance needs -pg (an InstanceNo is one of a PodGroup's)");
  if (o.instance !== undefined && o.instance < firstInstanceNo) throw new UsageError(`-instance: ${o.instance} is not an InstanceNo: ${instanceNumbersFrom}`);
  const scope: DriftScope = { from: o.from, force: o.force === true, ...(o.pg !== undefined && { pg: o.pg }), ...(o.instance !== undefined && { instance: o.instance }) };
  try {
    const client = clientFromOptions(args.options);
    const answer = await client.drift({ ...scope, ...(o.to !== undefined && { to: o.to }) });
    process.stdout.write(`${answer.message} (task ${answer.task})\n`);
    if (!o.wait) return 0;
    return (await follow(client, scope, o.timeout)) ? 0 : 1;
  } catch (e) {
    return reportFailure("drift", e);
  }
}

/** Poll the groups once a second until nothing is left to move, or the timeout. */
async function follow(client: OrchestratorClient, scope: DriftScope, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    let line: string;
    let done = false;
    try {
      const groups = scope.pg !== undefined ? [await client.getPodGroup(scope.pg)] : await client.listPodGroups();
      const left = driftLeft(groups, scope);
      done = left.length === 0;
      line = done ? `nothing left to move on ${scope.from}` : `${left.length} instance(s) still to move off ${scope.from}: ${left.slice(0, 8).join(", ")}${left.length > 8 ? ", ..." : ""}`;
    } catch (e) {
      line = `${e instanceof ApiError ? e.describe() : (e as Error).message} (retrying)`;
    }
    if (line !== last) process.stdout.write(`${line}\n`);
    last = line;
    if (done) return true;
    if (Date.now() + 1_000 > deadline) {
      process.stdout.write(`gave up after ${formatDuration(timeoutMs)} (-timeout)\n`);
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}
