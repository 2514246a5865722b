// One chaos run (docs/development.md, "Chaos suite"): rounds of random operations through the API
// interleaved with random faults, each round ended by a quiet period (wait until the API says
// every group converged, bounded) and an invariant check of every engine's containers against
// the desired state. The first round with a violation (or an operation the platform refused for
// good) ends the run; the report carries the seed and the operation log, and
// `npm run chaos -- --seed N` replays the same choices.
import { isPreviousContainer } from "../../controllers/shared/previous.ts";
import { ChaosEnv } from "./env.ts";
import { describeFault, injectFault, type FaultKind } from "./faults.ts";
import { checkInvariants, type DesiredGroup, type ObservedContainer, type StatusGroup, type Violation } from "./invariants.ts";
import { describeOperation, Model, performOperation, secretPath, type Operation } from "./operations.ts";
import { planRound } from "./plan.ts";
import { Rng } from "./prng.ts";

export interface ChaosOptions {
  seed: number;
  /** Rounds start until this much time has passed (at least one round runs). */
  durationMs: number;
  /** The private services dir (default /tmp/capstan-svc-chaos). */
  servicesDir?: string;
  /** Where log lines go as they happen (default: nowhere; they are in the report). */
  out?: (line: string) => void;
  /** Bound of each quiet period: convergence, then the invariants (default 90 s). */
  quietTimeoutMs?: number;
}

export interface ChaosReport {
  seed: number;
  rounds: number;
  operations: number;
  operationKinds: Partial<Record<Operation["kind"], number>>;
  faults: Partial<Record<FaultKind, number>>;
  checks: number;
  /** Server processes that exited on their own and were started again (as a supervisor would). */
  processExits: number;
  violations: Violation[];
  /** An operation or fault that could not be carried out (the platform refused it for good). */
  error?: string;
  /** Every operation, fault and check, in order. */
  log: string[];
}

interface GroupView {
  spec: { numInstances: number; pod: { version: number } };
  state: string;
  observedVersion: number;
  pods: { state: string; version: number; containers: { id: string; status: string }[] }[];
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const { seed, durationMs } = options;
  const servicesDir = options.servicesDir ?? "/tmp/capstan-svc-chaos";
  const quietTimeoutMs = options.quietTimeoutMs ?? 90_000;
  const rng = new Rng(seed);
  const model = new Model(`chaos${seed}`);
  const report: ChaosReport = { seed, rounds: 0, operations: 0, operationKinds: {}, faults: {}, checks: 0, processExits: 0, violations: [], log: [] };
  const started = Date.now();
  const log = (line: string) => {
    const stamped = `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s ${line}`;
    report.log.push(stamped);
    options.out?.(stamped);
  };
  const env = await ChaosEnv.start(servicesDir);
  const nodes = Object.keys(env.services.engines).sort();
  const noteExits = (round: number) => {
    for (const e of env.exits.splice(0)) {
      report.processExits++;
      log(`round ${round} supervisor: ${e}; started again`);
    }
  };
  try {
    await env.removeAllContainers();
    const left = await env.engines.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } });
    if (left.length > 0) throw new Error(`the engines in ${servicesDir} hold containers that cannot be removed (${left.map((c) => `${c.name} ${c.state}`).join(", ")}): use another --dir`);
    await env.registerApp(model.app);
    log(`seed ${seed}: orchestrator ${env.orchestrator.url}, secrets ${env.secrets.url}, etcd ${env.etcd.storeUrl}, engines ${nodes.join(",")}`);
    while (report.rounds === 0 || Date.now() - started < durationMs) {
      const round = ++report.rounds;
      try {
        for (const step of planRound(rng, model, nodes, env.etcd.members.length)) {
          if ("fault" in step) {
            const f = step.fault;
            report.faults[f.kind] = (report.faults[f.kind] ?? 0) + 1;
            const hit = await injectFault(env, model.app, f);
            log(`round ${round} fault: ${describeFault(f)} -> ${hit}`);
          } else {
            const op = step.op;
            report.operations++;
            report.operationKinds[op.kind] = (report.operationKinds[op.kind] ?? 0) + 1;
            log(`round ${round} op: ${describeOperation(op)}`);
            await performOperation(env, model, op);
          }
          noteExits(round);
        }
      } catch (e) {
        noteExits(round);
        report.error = (e as Error).message;
        log(`round ${round} error: ${report.error}`);
        break;
      }
      const quietStart = Date.now();
      const converged = await waitConverged(env, model, quietTimeoutMs);
      const { violations, observations, transient } = await checkUntilClean(env, model, Math.max(15_000, quietTimeoutMs - (Date.now() - quietStart)));
      report.checks++;
      noteExits(round);
      const took = ((Date.now() - quietStart) / 1000).toFixed(1);
      if (violations.length === 0) {
        // A violation seen before the engines settled is logged: it shows the checker saw the fault.
        const settling = transient ? `; ${observations} observations, the first saw ${transient.kind} ${transient.group}: ${transient.detail}` : "";
        log(`round ${round} check: ok (${model.groups.size} groups, ${[...model.groups.values()].reduce((s, g) => s + g.numInstances, 0)} instances; quiet after ${took}s${settling})`);
        continue;
      }
      report.violations = violations;
      log(`round ${round} check: ${violations.length} violation(s)${converged ? "" : " (the API never said converged)"} after ${took}s`);
      for (const v of violations) log(`  ${v.kind} ${v.group}: ${v.detail}`);
      break;
    }
  } finally {
    await env.stop();
  }
  return report;
}

/** The report as text: the figures, and on a violation the seed, the replay command and the log. */
export function formatReport(r: ChaosReport): string {
  const kinds = (m: Record<string, number | undefined>) =>
    Object.entries(m)
      .map(([k, n]) => `${k} ${n}`)
      .join(", ") || "none";
  const lines = [
    `chaos seed ${r.seed}: ${r.rounds} round(s), ${r.operations} operation(s) (${kinds(r.operationKinds)}), ${Object.values(r.faults).reduce((s, n) => s + (n ?? 0), 0)} fault(s) (${kinds(r.faults)}), ${r.checks} invariant check(s), ${r.processExits} process exit(s) restarted, ${r.violations.length} violation(s)${r.error !== undefined ? `, stopped by an error: ${r.error}` : ""}`,
  ];
  if (r.violations.length > 0 || r.error !== undefined) {
    lines.push(`replay: npm run chaos -- --seed ${r.seed}`, "operation log:", ...r.log.map((l) => `  ${l}`));
  }
  return lines.join("\n");
}

/** Until every desired group reads as converged through the API and every deleted one is gone. */
async function waitConverged(env: ChaosEnv, model: Model, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await isConverged(env, model).catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

async function isConverged(env: ChaosEnv, model: Model): Promise<boolean> {
  for (const g of model.list()) {
    const res = await env.api("GET", `/api/podgroups?name=${encodeURIComponent(g.name)}`);
    if (res.status !== 200) return false;
    const v = res.body as GroupView;
    const version = v.spec.pod.version;
    if (v.spec.numInstances !== g.numInstances || v.observedVersion !== version || v.pods.length !== g.numInstances) return false;
    if (v.pods.some((p) => p.state !== "running" || p.version !== version)) return false;
  }
  for (const name of model.deleted) {
    if ((await env.api("GET", `/api/podgroups?name=${encodeURIComponent(name)}`)).status !== 404) return false;
  }
  return true;
}

/** Observe and check until nothing is violated or `timeoutMs` passed: the last violations. */
async function checkUntilClean(env: ChaosEnv, model: Model, timeoutMs: number): Promise<{ violations: Violation[]; observations: number; transient?: Violation }> {
  const deadline = Date.now() + timeoutMs;
  let transient: Violation | undefined;
  for (let observations = 1; ; observations++) {
    let violations: Violation[];
    try {
      const { desired, observed, status } = await observe(env, model);
      violations = checkInvariants(desired, observed, status);
    } catch (e) {
      violations = [{ kind: "status", group: "*", detail: `could not observe: ${(e as Error).message}` }];
    }
    if (violations.length === 0 || Date.now() > deadline) return { violations, observations, ...(transient && { transient }) };
    transient ??= violations[0];
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

async function observe(env: ChaosEnv, model: Model): Promise<{ desired: DesiredGroup[]; observed: ObservedContainer[]; status: StatusGroup[] }> {
  const desired: DesiredGroup[] = [];
  const status: StatusGroup[] = [];
  const toStatus = (name: string, v: GroupView): StatusGroup => ({
    name,
    pods: v.pods.map((p, i) => ({ instanceNo: i, containers: p.containers.map((c) => ({ id: c.id, status: c.status })) })),
  });
  for (const g of model.list()) {
    const res = await env.api("GET", `/api/podgroups?name=${encodeURIComponent(g.name)}`);
    const v = res.status === 200 ? (res.body as GroupView) : undefined;
    desired.push({ name: g.name, numInstances: g.numInstances, version: v?.spec.pod.version ?? -1, secretFiles: g.secret !== undefined ? { [secretPath]: g.secret } : {} });
    if (v) status.push(toStatus(g.name, v));
  }
  for (const name of model.deleted) {
    const res = await env.api("GET", `/api/podgroups?name=${encodeURIComponent(name)}`);
    if (res.status === 200) status.push(toStatus(name, res.body as GroupView));
  }
  const containers = await env.engines.listContainers(undefined, { all: true, filters: { label: ["io.capstan.podgroup"] } });
  const observed: ObservedContainer[] = [];
  for (const c of containers) {
    const group = c.labels["io.capstan.podgroup"] ?? "";
    const o: ObservedContainer = {
      id: c.id,
      name: c.name,
      node: c.node,
      group,
      instance: c.labels["io.capstan.instance"] ?? "",
      version: c.labels["io.capstan.version"] ?? "",
      state: c.state,
      previous: isPreviousContainer(c),
    };
    const secret = model.groups.get(group)?.secret;
    if (secret !== undefined && c.state === "running" && !o.previous) {
      o.files = { [secretPath]: await env.docker(c.node, "exec", c.id, "cat", secretPath).catch(() => null) };
    }
    observed.push(o);
  }
  return { desired, observed, status };
}
