// `capstan deploy <cluster> -f app.yaml -image IMAGE [-wait]`: run an app's web proc from its
// application definition (docs/deploy.md).
//
// The spec orders "register the app, write the secrets, deploy", so deploy checks both BEFORE it
// changes anything: the app must be registered and the caller must hold a role on it (the console's
// role check), and every file web.secret_files lists must already be written (the secrets
// service's records of the proc). Then it creates or updates the PodGroup `<app>.web.web` as
// `capstan apply` does (an unchanged deploy changes nothing).
import { randomInt } from "node:crypto";
import { readFile } from "node:fs/promises";
import { parseAppDefinition, webPodGroup, webProcFullName, type AppDefinition } from "../../api/appdef/index.ts";
import { sameSecretFile } from "../../api/resources/secret-path.ts";
import type { OrchestratorClient } from "../client.ts";
import { ApiError } from "../http-errors.ts";
import { clusterClients, clusterCommandOptionDefs, positionals, type ClusterClients } from "../cluster-options.ts";
import { waitOptionDefs } from "../client-config.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { waitFor } from "../wait.ts";
import { applyOne } from "./apply.ts";
import { registryOptionDef } from "../build-options.ts";
import { releaseImage } from "../release-image.ts";
import { clusterOrchestratorHttp, syncNotifyRoutes } from "../notify-routes.ts";

const defs: OptionDef[] = [
  { name: "file", short: "f", type: "string", help: "the application definition (YAML)", default: "app.yaml" },
  { name: "image", type: "string", help: "the image to run (default: the app's newest release in -registry, docs/build.md)" },
  { name: "release", type: "string", help: "run this release of the app (a release-... tag of capstan releases): a roll back" },
  registryOptionDef,
  { name: "instances", type: "int", help: "number of instances of the web proc", default: 1 },
  { name: "network", type: "string", help: 'engine network mode of the containers ("none": networking off; default: the engine\'s)' },
  ...waitOptionDefs,
  ...clusterCommandOptionDefs,
];

const help = `${usage(
  "deploy",
  "Deploys an app's web proc: the PodGroup <app>.web.web running web.cmd with PORT set and the listed\nsecret files installed. Refuses, before changing anything, when the app is not registered or a\nlisted secret file is not written yet.",
  defs,
  "CLUSTER",
)}
example:
  capstan deploy prod -f app.yaml -image registry.local/hello:1.4 -wait
`;

/** Ports picked for a web proc without web.port (inside the container's own network namespace). */
const autoPortRange = [20_000, 40_000] as const;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(help);
    return 0;
  }
  const [cluster] = positionals(args.positionals, ["CLUSTER"], "capstan deploy prod -f app.yaml -image hello:1");
  const o = args.options as { file: string; image?: string; release?: string; instances: number; network?: string; wait?: boolean; timeout: number };
  if (o.image && o.release) throw new UsageError("-image and -release: give one of them");
  if (o.instances < 0 || o.instances > 1000) throw new UsageError(`-instances: ${o.instances} must be 0..1000`);
  try {
    let text: string;
    try {
      text = await readFile(o.file, "utf8");
    } catch (e) {
      throw new CommandFailure(`-f ${o.file}: ${(e as Error).message}`);
    }
    const { definition, warnings } = parseAppDefinition(text, o.file);
    for (const w of warnings) process.stderr.write(`capstan deploy: warning: ${w}\n`);
    if (!definition.web) throw new CommandFailure(`${o.file}: no web proc (web.cmd) to deploy`);
    const clients = clusterClients(cluster!, args.options);
    await checkReady(clients, definition);
    // The definition's notify map becomes the app's routes before the deploy, so its own events are
    // routed too (docs/notify.md).
    const routes = await syncNotifyRoutes(clusterOrchestratorHttp(cluster!, args.options), definition);
    if (routes !== "unchanged") process.stdout.write(`notify routes of ${definition.appname} ${routes}\n`);

    const name = webProcFullName(definition.appname);
    const port = definition.web.port ?? (await currentPort(clients.orchestrator, name)) ?? randomInt(autoPortRange[0], autoPortRange[1]);
    const image = o.image || (await releaseImage(cluster!, args.options, definition.appname));
    const spec = webPodGroup(definition, { image, port, instances: o.instances, network: o.network });
    process.stdout.write(`podgroup/${name} ${await applyOne(clients.orchestrator, spec)} (PORT=${port})\n`);
    if (!o.wait) return 0;
    const ok = await waitFor(clients.orchestrator, [{ kind: "converged", name, numInstances: spec.numInstances, restartPolicy: spec.restartPolicy, pod: spec.pod }], {
      timeoutMs: o.timeout,
      print: (l) => process.stdout.write(`${l}\n`),
    });
    return ok ? 0 : 1;
  } catch (e) {
    return reportFailure("deploy", e);
  }
}

/** The app is registered, the caller may act on it, and every listed secret file is written. */
async function checkReady(clients: ClusterClients, def: AppDefinition): Promise<void> {
  const app = def.appname;
  try {
    await clients.console.roleOn(app);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      throw new CommandFailure(`app ${app} is not registered with the console at ${clients.console.server}: register it first (capstan apps add CLUSTER ${app} -maintainer E-MAIL)`);
    }
    throw e;
  }
  const wanted = def.web?.secretFiles ?? [];
  if (wanted.length === 0) return;
  const proc = webProcFullName(app);
  // Matched as Secret-sync matches them: `secret.conf` is written by `/platform/app/secret.conf`.
  const written = (await clients.secrets.list(app, proc)).map((r) => r.path);
  const missing = wanted.filter((p) => !written.some((w) => sameSecretFile(w, p)));
  if (missing.length > 0) {
    throw new CommandFailure(
      `not deployed: ${missing.length} secret file${missing.length === 1 ? " is" : "s are"} not written for ${proc}:\n${missing.map((p) => `  ${p}`).join("\n")}\nwrite ${missing.length === 1 ? "it" : "them"} first: capstan secret add CLUSTER ${proc} PATH -f FILE`,
    );
  }
}

/** The PORT the group already runs with, so a redeploy without web.port keeps it. */
async function currentPort(orchestrator: OrchestratorClient, name: string): Promise<number | undefined> {
  try {
    const group = await orchestrator.getPodGroup(name);
    const env = group.spec.pod.containers[0]?.env ?? [];
    const port = Number(env.find((e) => e.startsWith("PORT="))?.slice(5));
    return Number.isInteger(port) && port > 0 && port <= 65535 ? port : undefined;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}
