// `capstan console`: the console (apps, maintainers, access tokens, role checks) in one process.
import { installWebConsole, publicUrlOf, webConsoleOptionDefs } from "../web-console.ts";
import { createLogger } from "../../runtime/log.ts";
import { consoleLeaderKey, consoleOptionDefs, consoleSettings, installConsole } from "../console.ts";
import { authFromOptions, authOptionDefs } from "../auth-options.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";
import { historyOption, serve, storeOption, webOption } from "../serve.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";
import { tlsFromOptions, tlsOptionDefs } from "../tls-options.ts";

const defs: OptionDef[] = [{ ...webOption, default: "127.0.0.1:9002" }, ...authOptionDefs, ...tlsOptionDefs, storeOption, ...storeConnectionOptionDefs, ...consoleOptionDefs, ...webConsoleOptionDefs, historyOption];

const summary = `Runs the console: apps and their maintainers, access tokens (stored as hashes; every
Capstan API checks them from the shared store) and /api/v1/whoami. On first start with no
admin token in the store it creates one and writes it to -admin-token-file (mode 0600), or
registers CAPSTAN_ADMIN_TOKEN. It is also the registry's token server
(/api/v1/authorize/registry/; -registry-*, docs/registry.md). With -oidc-issuer it logs users in
by single sign-on (capstan login CLUSTER -sso; -oidc-*, -sso-token-ttl, docs/console.md).`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(`${usage("console", summary, defs)}\nexample:\n  capstan console -web 127.0.0.1:9002 -store etcd://127.0.0.1:2379 -admin-token-file /etc/capstan/admin-token\n`);
    return 0;
  }
  const o = args.options as { web: string; store: string; history: number };
  const settings = consoleSettings(args.options);
  const publicUrl = publicUrlOf(args.options);
  return serve(
    { name: "console", web: o.web, tls: tlsFromOptions(args.options), storeUrl: o.store, storeConnection: storeConnectionFromOptions(args.options), historyMs: o.history, auth: authFromOptions(args.options), leaderKey: consoleLeaderKey, log: createLogger("console") },
    async (ctx) => {
      const { ssoLogin } = await installConsole(ctx, settings);
      installWebConsole(ctx, { secure: tlsFromOptions(args.options) !== undefined, sso: ssoLogin, publicUrl });
    },
  );
}
