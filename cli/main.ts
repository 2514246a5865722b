// `capstan <command>`: dispatches to one module per command. Each command module exports
// `run(argv): Promise<number>` (the exit code) and owns its options and `-h` text.
import { setEnvCommand, UsageError } from "./options.ts";
import { version } from "./version.ts";

interface Command {
  summary: string;
  load: () => Promise<{ run: (argv: string[]) => Promise<number> }>;
}

const commands: Record<string, Command> = {
  up: { summary: "every component in one process (embedded store, local Docker)", load: () => import("./commands/up.ts") },
  orchestrator: { summary: "the orchestrator: PodGroup API and controllers", load: () => import("./commands/orchestrator.ts") },
  secrets: { summary: "the secrets service and Secret-sync; secrets init|unseal|seal|status manage its seal", load: () => import("./commands/secrets.ts") },
  console: { summary: "the console: apps, maintainers, access tokens, role checks", load: () => import("./commands/console.ts") },
  authproxy: { summary: "the SSO auth proxy (conf/config.yaml); authproxy generate writes its nginx fragment", load: () => import("./commands/authproxy.ts") },
  registry: { summary: "the image registry (distribution's config.yaml); registry check-config FILE validates one", load: () => import("./commands/registry.ts") },
  apply: { summary: "create or update PodGroups from a YAML or JSON file (-f)", load: () => import("./commands/apply.ts") },
  get: { summary: "show a PodGroup (get podgroup NAME), all of them (get podgroups), a dependency (get depends NAME)", load: () => import("./commands/get.ts") },
  logs: { summary: "print a PodGroup's container output: logs NAME[/INSTANCE] [-f] [-n N] [-since 10m] [-t]", load: () => import("./commands/logs.ts") },
  exec: { summary: "run a command in a PodGroup instance's container: exec NAME[/INSTANCE] [-i] [-t] -- CMD [ARG...]", load: () => import("./commands/exec.ts") },
  events: { summary: "what the controllers recorded: deploys, crashes, restarts, drift, nodes (events [-app A] [-name N] [-since 10m] [-w])", load: () => import("./commands/events.ts") },
  notify: { summary: "where app events are sent: notify set KIND -webhook URL (admin), list, delete KIND, route -f app.yaml, routes APP", load: () => import("./commands/notify.ts") },
  scale: { summary: "set a PodGroup's number of instances (scale NAME N)", load: () => import("./commands/scale.ts") },
  restart: { summary: "restart a PodGroup's instances one at a time, as a rollout (restart NAME)", load: () => import("./commands/restart.ts") },
  delete: { summary: "delete a PodGroup and its instances (delete podgroup NAME)", load: () => import("./commands/delete.ts") },
  nodes: { summary: "list the cluster's nodes: state, capacity, reserved, containers", load: () => import("./commands/nodes.ts") },
  drift: { summary: "move instances off a node (drift -from A [-to B] [-pg NAME [-instance N]] [-force])", load: () => import("./commands/drift.ts") },
  login: { summary: "save a cluster's service URLs and your access token (login CLUSTER)", load: () => import("./commands/login.ts") },
  secret: { summary: "write, show, delete a proc's secret files (secret add|view|delete CLUSTER PROC ...)", load: () => import("./commands/secret.ts") },
  build: { summary: "build an app's image from its definition on a Docker engine (build -f app.yaml [-C DIR] [-docker HOST])", load: () => import("./commands/build.ts") },
  test: { summary: "run the definition's test.script in the app's build image (test -f app.yaml)", load: () => import("./commands/test.ts") },
  release: { summary: "make the release image of the app's build and push it to the platform registry (release CLUSTER -f app.yaml)", load: () => import("./commands/release.ts") },
  releases: { summary: "list an app's releases in the platform registry, newest first (releases CLUSTER APP)", load: () => import("./commands/releases.ts") },
  deploy: { summary: "deploy an app's web proc from its definition (deploy CLUSTER -f app.yaml -image IMAGE)", load: () => import("./commands/deploy.ts") },
  apps: { summary: "register and list apps, change their maintainers (admin: apps add|list|maintainers add|remove CLUSTER ...)", load: () => import("./commands/apps.ts") },
  tokens: { summary: "create and list access tokens (admin: tokens create CLUSTER -user E-MAIL [-role viewer -apps A,B], tokens list)", load: () => import("./commands/tokens.ts") },
  backup: { summary: "write every Capstan key of a store, at one revision, to a file (backup -store URL -o FILE)", load: () => import("./commands/backup.ts") },
  restore: { summary: "restore a backup into a store, running platform or not (restore -store URL FILE)", load: () => import("./commands/restore.ts") },
  whoami: { summary: "show who your access token names: user, role, apps (whoami [-context CLUSTER])", load: () => import("./commands/whoami.ts") },
};

function help(): string {
  const w = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    "usage: capstan <command> [options]   (capstan <command> -h for its options; capstan --version)",
    "",
    "commands:",
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(w)}  ${c.summary}`),
    "",
  ].join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "-h" || name === "--help" || name === "help") {
    process.stdout.write(help());
    return name ? 0 : 2;
  }
  if (name === "--version" || name === "-version" || name === "version") {
    process.stdout.write(`capstan version ${version()}\n`);
    return 0;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    process.stderr.write(`capstan: unknown command "${name}"\n\n${help()}`);
    return 2;
  }
  // Options read CAPSTAN_<COMMAND>_<OPTION> (options.ts): a variable meant for one server never reaches another.
  setEnvCommand(name, Object.keys(commands));
  try {
    return await (await command.load()).run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`capstan ${name}: ${e.message} (capstan ${name} -h for help)\n`);
      return 2;
    }
    throw e;
  }
}
