// The orchestrator's assembly: its API, informers, node monitor and PodGroup controller put on a
// process's manager. `capstan orchestrator` and `capstan up` both install it through here, so the
// two run the same orchestrator.
//
// Writes: the API writes desired state through the plain store (any replica accepts requests, as
// every write is a compare-and-swap); the controller and the node monitor run on the leader only
// and write through the fenced store, so a deposed leader's late write is refused by the store.
import { fencedStore } from "../adapters/store/fenced.ts";
import { orchestratorInformers } from "../api/orchestrator/informers.ts";
import { createDependsApi } from "../api/orchestrator/depends.ts";
import { createNodesApi } from "../api/orchestrator/nodes.ts";
import { createPodGroupApi } from "../api/orchestrator/podgroups.ts";
import { keys } from "../api/resources/keys.ts";
import { createDependencyController } from "../controllers/dependency/index.ts";
import { createNodeMonitor } from "../controllers/node/monitor.ts";
import { createPodGroupController } from "../controllers/podgroup/index.ts";
import type { OrchestratorSettings } from "./orchestrator-options.ts";
import type { ServeContext } from "./serve.ts";

/** The orchestrator's leader key: processes running its controllers against one store share it. */
export const orchestratorLeaderKey = keys.leader;

export function installOrchestrator(ctx: ServeContext, settings: OrchestratorSettings): void {
  const { store, cluster, manager, elector, log, access } = ctx;
  if (!cluster) throw new Error("the orchestrator needs -cluster");
  const registry = manager.registry;
  const fenced = fencedStore(store, () => elector.fence());

  const { nodes, podGroups, podGroupStatuses } = orchestratorInformers(store, { log, registry });
  manager.addInformer(nodes).addInformer(podGroups).addInformer(podGroupStatuses);
  manager.app.route("/", createPodGroupApi({ store, nodes, podGroups, podGroupStatuses, log, access }));
  manager.app.route("/", createDependsApi({ store, nodes, log, access }));
  manager.app.route("/", createNodesApi({ store, nodes, podGroups, log, access }));

  manager.add(createNodeMonitor({ store: fenced, cluster, nodeTimeoutMs: settings.nodeTimeoutMs, log, registry }));
  const controller = createPodGroupController({
    store: fenced,
    cluster,
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    workers: settings.workers,
    log,
    registry,
  });
  for (const informer of controller.informers) manager.addInformer(informer);
  for (const runnable of controller.runnables) manager.add(runnable);

  const dependencies = createDependencyController({
    store: fenced,
    cluster,
    gcMs: settings.dependsGcMs,
    updateWaitMs: settings.updateWaitMs,
    refreshIntervalMs: settings.refreshIntervalMs,
    log,
    registry,
  });
  for (const informer of dependencies.informers) manager.addInformer(informer);
  for (const runnable of dependencies.runnables) manager.add(runnable);
}
