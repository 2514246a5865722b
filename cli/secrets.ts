// The secrets service's assembly: its API (/v2/secrets, /v2/sys) and the Secret-sync controller
// that installs the records into the containers of the PodGroups that list them. `capstan secrets`
// and `capstan up` both install it through here.
//
// Writes: the API writes records through the plain store (every write is for one address, and any
// replica may serve it). Secret-sync and the seal-state publisher run under the secrets leader key
// (secretsLeaderKey) in every process that installs them, `capstan secrets` (its own leader key) as
// well as `capstan up` (an election of its own beside the orchestrator's), so one of them runs per
// store (docs/secret-sync.md, "Leadership"); they write through the store fenced by that key's
// lease. Secret-sync installs nothing while the vault is sealed, and resumes when it is unsealed.
//
// Auto-unseal (docs/secrets.md, "Auto-unseal"): with an unseal key file the service unseals
// itself before it serves; a file that may not be used (mode, owner, wrong shares) stops the start.
// The seal is shown in /readyz's details and published to the store for the PodGroup controller.
import { fencedStore } from "../adapters/store/fenced.ts";
import { autoUnseal, createSecretsService, readSecrets, SealStatusPublisher, UnsealFileError, type AutoUnsealOutcome } from "../api/secrets/index.ts";
import { createSecretSyncController } from "../controllers/secretsync/index.ts";
import { UsageError, type OptionDef } from "./options.ts";
import type { ServeContext } from "./serve.ts";

/** -unseal-key-file of `capstan secrets` and `capstan up` (up gives its own default and help). */
export const unsealKeyFileOption: OptionDef = {
  name: "unseal-key-file",
  type: "string",
  help: "unseal at start from the key shares in this file (mode 0600, owned by you); an uninitialized service is initialized and its key written there",
};

/** What installSecrets does with an unseal key file. */
export interface UnsealSettings {
  file: string;
  /** A missing file of an initialized store stops the start (the operator named the file). */
  required: boolean;
}

/** /readyz's detail and the PodGroup status note while sealed. */
export const sealedNote = "secrets service sealed";

/** Secret-sync's leader key, in every process that runs it (outside /platform/secrets/, which holds only records). */
export const secretsLeaderKey = "/platform/secret-sync/leader";

export async function installSecrets(ctx: ServeContext, unseal?: UnsealSettings): Promise<AutoUnsealOutcome> {
  const { store, cluster, manager, log } = ctx;
  if (!cluster) throw new Error("the secrets service needs -cluster (Secret-sync installs files into containers)");
  const registry = manager.registry;
  const { app, vault, informers } = createSecretsService({ store, gate: ctx.access.gate, apps: ctx.verifier, log, registry });
  manager.app.route("/", app);
  for (const informer of informers) manager.addInformer(informer);

  const leader = ctx.underLeaderKey(secretsLeaderKey);
  const fenced = fencedStore(store, () => leader.fence());
  const sync = createSecretSyncController({
    store: fenced,
    cluster,
    vault,
    readSecrets,
    log,
    registry,
  });
  for (const informer of sync.informers) manager.addInformer(informer);
  for (const runnable of sync.runnables) leader.add(runnable);
  leader.add(new SealStatusPublisher(fenced, vault, log));
  manager.addReadinessDetail("secrets", () => (vault.sealed() ? sealedNote : undefined));

  if (unseal === undefined) return "sealed";
  try {
    return await autoUnseal(vault, { file: unseal.file, initialize: true, required: unseal.required, log });
  } catch (e) {
    if (e instanceof UnsealFileError) throw new UsageError(`-unseal-key-file: ${e.message}`);
    throw e;
  }
}
