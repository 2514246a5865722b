// `capstan apply -f group.yaml [-wait]`: make the server hold the groups in the file.
//
// Like kubectl apply, re-applying an unchanged file changes nothing: a new group is POSTed; for one
// that exists (409 AlreadyExists) the pod spec is PATCHed (cmd=spec, which bumps the version and
// rolls the instances one at a time) only when it differs, and the count and restart policy
// (cmd=replica) only when they differ.
import type { PodGroupSpec } from "../../api/resources/podgroup.ts";
import type { OrchestratorClient } from "../client.ts";
import { ApiError } from "../http-errors.ts";
import { clientOptionDefs, waitOptionDefs } from "../client-config.ts";
import { clientFromOptions } from "../client.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { ManifestError, readManifest } from "../manifest.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { samePodSpec } from "../spec-match.ts";
import { waitFor, type WaitTarget } from "../wait.ts";

const defs: OptionDef[] = [
  { name: "file", short: "f", type: "string", help: "PodGroup file, YAML or JSON (- = standard input); several groups separated by ---" },
  ...waitOptionDefs,
  ...clientOptionDefs,
];

const help = `${usage("apply", "Creates the PodGroups in a file, or updates them to match it.", defs)}
examples:
  capstan apply -f examples/hello.yaml -wait
  capstan apply -f group.json -server http://10.0.0.5:9000
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  if (typeof args.options.file !== "string") throw new UsageError("-f FILE is required");
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  try {
    const specs = await readManifest(args.options.file);
    const client = clientFromOptions(args.options);
    const targets: WaitTarget[] = [];
    for (const spec of specs) {
      process.stdout.write(`podgroup/${spec.name} ${await applyOne(client, spec)}\n`);
      targets.push({ kind: "converged", name: spec.name, numInstances: spec.numInstances, restartPolicy: spec.restartPolicy, pod: spec.pod });
    }
    if (!args.options.wait) return 0;
    const ok = await waitFor(client, targets, { timeoutMs: args.options.timeout as number, print: (l) => process.stdout.write(`${l}\n`) });
    return ok ? 0 : 1;
  } catch (e) {
    if (e instanceof ManifestError) {
      process.stderr.write(`capstan apply: ${e.file} is not a valid PodGroup:\n${e.problems.map((p) => `  ${p}`).join("\n")}\n`);
      return 1;
    }
    return reportFailure("apply", e);
  }
}

/** Create or update one group; answers what was done ("created", "unchanged", ...). */
export async function applyOne(client: OrchestratorClient, spec: PodGroupSpec): Promise<string> {
  try {
    await client.createPodGroup(spec);
    return "created";
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 409 && e.reason === "AlreadyExists")) throw e;
  }
  const current = await client.getPodGroup(spec.name);
  if (current.spec.deleting) throw new CommandFailure(`podgroup ${spec.name} is being deleted; wait for it to go (capstan delete podgroup ${spec.name} -wait), then apply again`);
  if (current.spec.namespace !== spec.namespace) {
    throw new CommandFailure(`podgroup ${spec.name} is in namespace ${current.spec.namespace}, the file says ${spec.namespace}; a namespace cannot change: delete the group first`);
  }
  const done: string[] = [];
  if (!samePodSpec(current.spec.pod, spec.pod, spec.name)) {
    await client.updatePodSpec(spec.name, spec.pod);
    done.push(`spec updated (was version ${current.spec.pod.version}; instances roll one at a time)`);
  }
  if (current.spec.numInstances !== spec.numInstances || current.spec.restartPolicy !== spec.restartPolicy) {
    await client.updateReplica(spec.name, spec.numInstances, spec.restartPolicy);
    done.push(`replicas set to ${spec.numInstances}, restart policy ${spec.restartPolicy}`);
  }
  return done.length > 0 ? done.join("; ") : "unchanged";
}
