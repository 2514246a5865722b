// `capstan nodes [-o json]`: the cluster's nodes as the orchestrator's node monitor records them
// (GET /api/nodes): a table, or the server's JSON.
import type { NodeRecord } from "../../api/resources/node.ts";
import { clientOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { jsonAliasDef, outputFormat, outputOptionDef } from "../output-option.ts";
import { table } from "../render.ts";

const defs: OptionDef[] = [outputOptionDef(["table", "json"], "the server's answer, unchanged"), jsonAliasDef, ...clientOptionDefs];

const help = `${usage("nodes", "Lists the cluster's nodes: state, capacity, what Capstan's containers reserve, container count.", defs)}
examples:
  capstan nodes
  capstan nodes -o json
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  const output = outputFormat(args.options, ["table", "json"]);
  try {
    const nodes = await clientFromOptions(args.options).listNodes();
    process.stdout.write(output === "json" ? `${JSON.stringify(nodes, null, 2)}\n` : renderNodes(nodes));
    return 0;
  } catch (e) {
    return reportFailure("nodes", e);
  }
}

/** NAME STATE ADDRESS CPUS MEMORY RESERVED CONTAINERS; an unreachable node says since when and why. */
export function renderNodes(nodes: NodeRecord[]): string {
  if (nodes.length === 0) return "no nodes\n";
  const rows = nodes.map((n) => [
    n.name,
    n.state === "ready" ? "ready" : `unreachable since ${n.unreachableSince ?? "?"}${n.error ? ` (${n.error})` : ""}`,
    n.address,
    String(n.cpus),
    bytes(n.memoryBytes),
    `${round(n.reserved.cpus)} CPU, ${bytes(n.reserved.memoryBytes)}`,
    `${n.containersRunning}/${n.containers}`,
  ]);
  return table(["NAME", "STATE", "ADDRESS", "CPUS", "MEMORY", "RESERVED", "CONTAINERS"], rows);
}

/** 1.5GiB, 64MiB, 0B: binary units, as docker prints them. */
export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${round(v)}${units[u]}`;
}

function round(v: number): string {
  return String(Math.round(v * 100) / 100);
}
