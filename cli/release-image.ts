// The image `capstan deploy` runs when it is given no -image (docs/build.md, "Deploy"): the newest
// release of the app in the platform registry (its release- tags ordered by their UTC time), or
// the release named with -release (a roll back), which must exist.
import { RegistryError } from "../adapters/build/registry-error.ts";
import { listTags } from "../adapters/build/registry-tags.ts";
import { isReleaseTag, releasesNewestFirst } from "../adapters/build/plan.ts";
import { registryCredentials } from "./registry-credentials.ts";
import { CommandFailure } from "./failure.ts";
import { UsageError, type OptionValues } from "./options.ts";

/** `<registry>/<app>:<release tag>`: the newest, or `release` when given. */
export async function releaseImage(cluster: string, options: OptionValues, app: string): Promise<string> {
  const registry = options.registry as string;
  const wanted = typeof options.release === "string" && options.release !== "" ? options.release : undefined;
  if (wanted !== undefined && !isReleaseTag(wanted)) throw new UsageError(`-release: "${wanted}" is not a release tag (release-<UTC time>-<digest>; capstan releases ${cluster} ${app} lists them)`);
  const creds = await registryCredentials(cluster, options);
  let tags: string[];
  try {
    tags = await listTags({ registry, repository: app, user: creds.user, accessToken: creds.token, timeoutMs: options["request-timeout"] as number });
  } catch (e) {
    // The registry unreachable or refusing: one line naming it, as every client failure.
    throw new CommandFailure(`registry ${registry}: ${e instanceof RegistryError ? e.message : (e as Error).message}`);
  }
  const releases = releasesNewestFirst(tags);
  if (releases.length === 0) throw new CommandFailure(`no releases of ${app} in ${registry}: capstan build, then capstan release ${cluster} -f app.yaml (or give -image)`);
  if (wanted !== undefined && !releases.includes(wanted)) throw new CommandFailure(`-release ${wanted}: no such release of ${app} in ${registry} (capstan releases ${cluster} ${app} lists them)`);
  return `${registry}/${app}:${wanted ?? releases[0]}`;
}
