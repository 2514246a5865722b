// How an application definition becomes the PodGroup of its web proc (docs/deploy.md, "What
// `capstan deploy CLUSTER -f app.yaml -image IMAGE` does"):
// `<app>.web.<proc>` in namespace <app>, running web.cmd under a shell, PORT in its environment,
// the listed secret files on its container (Secret-sync installs them, and the PodGroup controller
// starts the container only once they are in place).
import type { PodGroupSpec } from "../resources/podgroup.ts";
import type { AppDefinition } from "./definition.ts";

/** The file format has exactly one web proc; its proc name is "web". */
export const webProcName = "web";

/** `<app>.web.<proc>`: the PodGroup name and the `proc` secrets are addressed by. */
export function webProcFullName(appname: string, procName = webProcName): string {
  return `${appname}.web.${procName}`;
}

export interface WebPodGroupOptions {
  image: string;
  /** The port the proc listens on: web.port, or one the deployer chose (in PORT either way). */
  port: number;
  instances: number;
  /** Engine network mode; absent = the engine's default. "none" = networking off. */
  network?: string;
}

/** The PodGroup that runs the definition's web proc. The definition must have a web section. */
export function webPodGroup(def: AppDefinition, opts: WebPodGroupOptions): PodGroupSpec {
  if (!def.web) throw new Error(`${def.appname}: the definition has no web proc`);
  const name = webProcFullName(def.appname);
  const offline = opts.network === "none";
  return {
    name,
    namespace: def.appname,
    numInstances: opts.instances,
    restartPolicy: "always",
    pod: {
      namespace: def.appname,
      ...(opts.network !== undefined ? { network: opts.network } : {}),
      containers: [
        {
          image: opts.image,
          command: ["sh", "-c", def.web.cmd],
          env: [`PORT=${opts.port}`],
          // Publishing needs a network; with networking off the port stays inside the container.
          ...(offline ? {} : { expose: opts.port }),
          ...(def.web.secretFiles.length > 0 ? { secretFiles: def.web.secretFiles } : {}),
        },
      ],
    },
  };
}
