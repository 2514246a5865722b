// The registry credentials of release, releases and deploy (docs/registry.md, "Credentials").
import { homedir } from "node:os";
import { configPath, credentials, readClientConfig } from "./client-config.ts";
import { clusterClients } from "./cluster-options.ts";
import { CommandFailure } from "./failure.ts";
import type { OptionValues } from "./options.ts";

/**
 * The registry credentials of a cluster's user (docs/registry.md, "Credentials"): the console
 * access token as the password and its user (whoami) as the user name.
 */
export async function registryCredentials(cluster: string, options: OptionValues): Promise<{ user: string; token: string }> {
  const path = configPath(homedir());
  let loaded: ReturnType<typeof readClientConfig> | undefined;
  const { token } = credentials(options, cluster, () => (loaded ??= readClientConfig(path)), path);
  if (token === undefined) throw new CommandFailure(`no access token for cluster ${cluster}: capstan login ${cluster}, or -token`);
  const { user } = await clusterClients(cluster, options).console.whoami();
  return { user, token };
}
