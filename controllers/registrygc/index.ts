// The Registry-GC controller, assembled (docs/registry-gc.md): two informers (runs, policies) and
// two controllers of the runtime framework, leader-only in `capstan registry` and `capstan up`, so
// with several registries on one bucket (and one store) exactly one collects at a time.
//
//   a run record written (pending)       -> runs controller: carry it out (runs.ts), one at a time
//   a policy written, or its interval up -> policies controller: write a pending run for it
import type { Registry } from "prom-client";
import type { StorageDriver } from "../../adapters/blobstore/driver.ts";
import type { Store } from "../../adapters/store/store.ts";
import { createRun, decodeRun, gcKeys, type RunRecord } from "../../api/resources/registry-gc.ts";
import { Controller } from "../../runtime/controller.ts";
import { Informer } from "../../runtime/informer.ts";
import type { KeyValueLike } from "../../runtime/listwatch.ts";
import type { Logger } from "../../runtime/log.ts";
import type { Result } from "../../runtime/result.ts";
import { informerSource } from "../../runtime/source.ts";
import { GcMetrics } from "./metrics.ts";
import { graceSecondsOf, parsePolicy, policyPrefix, untaggedGraceSecondsOf, type GcPolicy } from "./policy.ts";
import type { RequestActivity } from "./pacer.ts";
import { RunReconciler } from "./runs.ts";

export interface RegistryGcOptions {
  driver: StorageDriver;
  /** The store as it is: informers read it. */
  store: Store;
  /** The FENCED store: every write of the controllers. */
  fenced: Store;
  identity: string;
  /** The leadership term's fence revision (undefined when not leading). */
  term: () => number | undefined;
  registry: Registry;
  log: Logger;
  /** Wall clock (policies' intervals). */
  now?: () => number;
  /** The registry API's requests, which runs yield to (pacer.ts). */
  activity?: RequestActivity;
}

export interface RegistryGc {
  /** Add with manager.addInformer(). */
  informers: Informer<unknown>[];
  /** Add with manager.add() as leader-only. */
  controllers: Controller[];
}

const runIdOf = (key: string) => key.slice(gcKeys.runs.length);

export function createRegistryGc(o: RegistryGcOptions): RegistryGc {
  const log = o.log.child({ component: "registry-gc" });
  const now = o.now ?? Date.now;
  const runs = new Informer<RunRecord>({ name: "registry-gc-runs", source: o.store, prefix: gcKeys.runs, decode: (kv: KeyValueLike) => decodeRun(kv), log, registry: o.registry });
  const policies = new Informer<GcPolicy>({
    name: "registry-gc-policies",
    source: o.store,
    prefix: policyPrefix,
    decode: (kv: KeyValueLike) => {
      const parsed = parsePolicy(JSON.parse(kv.value));
      if (!parsed.ok) throw new Error(parsed.problems.join("; "));
      return parsed.policy;
    },
    log,
    registry: o.registry,
  });
  const metrics = new GcMetrics(o.registry);
  const runner = new RunReconciler({ driver: o.driver, store: o.fenced, runs, identity: o.identity, term: o.term, metrics, log, ...(o.activity && { activity: o.activity }) });
  const runController = new Controller({
    name: "registry-gc-runs",
    reconcile: runner.reconcile,
    watches: [informerSource(runs, (r, key) => (r.state === "pending" || r.state === "running" ? [runIdOf(key)] : []))],
    maxConcurrentReconciles: 1,
    // A run over a large S3 bucket may take hours; it is aborted when leadership is lost.
    reconcileTimeoutMs: 24 * 3600_000,
    log,
    registry: o.registry,
  });

  /** A policy with an interval: a pending run once the interval since its last run is up. */
  const schedule = async (name: string): Promise<Result | void> => {
    const policy = policies.get(`${policyPrefix}${name}`);
    if (policy?.intervalSeconds === undefined) return;
    const intervalMs = policy.intervalSeconds * 1000;
    const mine = runs.list().filter((r) => r.options.policy === name && r.requestedBy === `policy ${name}`);
    if (mine.some((r) => r.state === "pending" || r.state === "running")) return { requeueAfterMs: intervalMs };
    const last = mine.reduce((t, r) => Math.max(t, Date.parse(r.requestedAt)), Number.NEGATIVE_INFINITY);
    const due = last + intervalMs;
    const t = now();
    if (due > t) return { requeueAfterMs: due - t };
    await createRun(
      o.fenced,
      {
        dryRun: false,
        mode: "incremental",
        deleteUntagged: policy.deleteUntagged ?? false,
        graceSeconds: graceSecondsOf(policy),
        untaggedGraceSeconds: untaggedGraceSecondsOf(policy),
        policy: name,
      },
      `policy ${name}`,
      new Date(t),
    );
    log.info({ policy: name }, "garbage collection run scheduled by policy");
    return { requeueAfterMs: intervalMs };
  };
  const policyController = new Controller({
    name: "registry-gc-policies",
    reconcile: schedule,
    watches: [informerSource(policies, (p) => [p.name])],
    log,
    registry: o.registry,
  });
  return { informers: [runs, policies] as Informer<unknown>[], controllers: [runController, policyController] };
}
