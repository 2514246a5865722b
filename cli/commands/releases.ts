// `capstan releases CLUSTER APP [-o json]`: the app's release tags in the platform registry, newest
// first (docs/build.md).
import { listTags } from "../../adapters/build/registry-tags.ts";
import { releasesNewestFirst, releaseTime } from "../../adapters/build/plan.ts";
import { registryOptionDef, reportBuildFailure } from "../build-options.ts";
import { registryCredentials } from "../registry-credentials.ts";
import { clusterCommandOptionDefs, positionals } from "../cluster-options.ts";
import { outputFormat, outputOptionDef } from "../output-option.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [registryOptionDef, outputOptionDef(["table", "json"], "[{tag, time, image}], newest first"), ...clusterCommandOptionDefs];

const help = `${usage("releases", "Lists an app's releases (release-<UTC time>-<digest> tags of <registry>/<app>), newest first.", defs, "CLUSTER APP")}
example:
  capstan releases local hello
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [cluster, app] = positionals(args.positionals, ["CLUSTER", "APP"], "capstan releases local hello");
  const format = outputFormat(args.options, ["table", "json"]);
  const registry = args.options.registry as string;
  try {
    const creds = await registryCredentials(cluster!, args.options);
    const tags = releasesNewestFirst(await listTags({ registry, repository: app!, user: creds.user, accessToken: creds.token, timeoutMs: args.options["request-timeout"] as number }));
    const rows = tags.map((tag) => ({ tag, time: releaseTime(tag)!.toISOString(), image: `${registry}/${app}:${tag}` }));
    if (format === "json") process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    else if (rows.length === 0) process.stdout.write(`no releases of ${app} in ${registry}\n`);
    else process.stdout.write([`${"TAG".padEnd(38)} ${"TIME (UTC)".padEnd(23)}   IMAGE`, ...rows.map((r) => `${r.tag.padEnd(38)} ${r.time.slice(0, 23).replace("T", " ")}   ${r.image}`)].join("\n") + "\n");
    return 0;
  } catch (e) {
    return reportBuildFailure("releases", e);
  }
}
