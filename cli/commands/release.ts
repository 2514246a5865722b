// `capstan release CLUSTER -f app.yaml [-registry HOST:PORT]`: the release image of the current
// build, its meta image and the build image, pushed to the platform registry with the user's
// console token (docs/build.md).
import { interruptSignal, release } from "../../adapters/build/pipeline.ts";
import { buildOptionDefs, loadBuild, registryOptionDef, reportBuildFailure } from "../build-options.ts";
import { registryCredentials } from "../registry-credentials.ts";
import { clusterCommandOptionDefs, positionals } from "../cluster-options.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  ...buildOptionDefs,
  registryOptionDef,
  { name: "push-timeout", type: "duration", help: "longest each image push may take", default: "10m" },
  { name: "no-push", type: "bool", help: "tag the images only; push nothing" },
  ...clusterCommandOptionDefs,
];

const help = `${usage(
  "release",
  "Makes the release image of the app's current build (release.copy out of the build image into\nrelease.dest_base; without release: the build image itself), tagged release-<UTC time>-<digest>,\nwith its meta-<...> image (the definition file) and the build-<...> tag, and pushes the three to\n<registry>/<app> with your console access token.",
  defs,
  "CLUSTER",
)}
example:
  capstan release local -f app.yaml -registry 127.0.0.1:5000
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [cluster] = positionals(args.positionals, ["CLUSTER"], "capstan release local -f app.yaml");
  const o = args.options as { registry: string; "push-timeout": number; "no-push"?: boolean };
  // SIGINT, SIGTERM: the running step removes its container and the command ends 130 / 143.
  const interrupt = interruptSignal();
  try {
    const { ctx, file, text } = await loadBuild("release", args.options);
    ctx.signal = interrupt.signal;
    const creds = o["no-push"] ? undefined : await registryCredentials(cluster!, args.options);
    const auth = creds && { username: creds.user, password: creds.token, serveraddress: o.registry };
    const r = await release(ctx, { registry: o.registry, definitionFile: file, definitionText: text, auth, pushTimeoutMs: o["push-timeout"] });
    process.stderr.write(`capstan: ${r.pushed ? "pushed" : "tagged"} ${r.repository}:${r.release} (with ${r.meta}, ${r.build})\n`);
    process.stdout.write(`${r.repository}:${r.release}\n`);
    return 0;
  } catch (e) {
    return reportBuildFailure("release", e);
  } finally {
    interrupt.dispose();
  }
}
