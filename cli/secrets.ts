// The secrets service's assembly: its API (/v2/secrets, /v2/sys) and the Secret-sync controller
// that installs the records into the containers of the PodGroups that list them. `capstan secrets`
// and `capstan up` both install it through here.
//
// Writes: the API writes records through the plain store (every write is for one address, and any
// replica may serve it); Secret-sync runs on the leader only and writes its markers through the
// fenced store. It installs nothing while the vault is sealed, and resumes when it is unsealed.
import { fencedStore } from "../adapters/store/fenced.ts";
import { createSecretsService, readSecrets } from "../api/secrets/index.ts";
import { createSecretSyncController } from "../controllers/secretsync/index.ts";
import type { ServeContext } from "./serve.ts";

/** Secret-sync's leader key (outside /platform/secrets/, which holds only records). */
export const secretsLeaderKey = "/platform/secret-sync/leader";

export function installSecrets(ctx: ServeContext): void {
  const { store, cluster, manager, elector, log } = ctx;
  if (!cluster) throw new Error("the secrets service needs -cluster (Secret-sync installs files into containers)");
  const registry = manager.registry;
  const { app, vault, informers } = createSecretsService({ store, gate: ctx.access.gate, apps: ctx.verifier, log, registry });
  manager.app.route("/", app);
  for (const informer of informers) manager.addInformer(informer);

  const sync = createSecretSyncController({
    store: fencedStore(store, () => elector.fence()),
    cluster,
    vault,
    readSecrets,
    log,
    registry,
  });
  for (const informer of sync.informers) manager.addInformer(informer);
  for (const runnable of sync.runnables) manager.add(runnable, { leaderOnly: true });
}
