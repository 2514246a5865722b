// The chaos run's faults (docs/development.md, "Chaos suite"): SIGKILL of the orchestrator or the
// secrets process (then started again, the secrets service unsealed again), a Docker engine
// restarted, an etcd member killed and started again, and `docker rm -f` or `docker stop` of one
// of Capstan's containers behind its back. The kind and the target's position are drawn from the
// PRNG; a container target is the drawn position in the engines' list sorted by name.
import type { ChaosEnv } from "./env.ts";
import type { Rng } from "./prng.ts";

export type Fault =
  | { kind: "kill-orchestrator" }
  | { kind: "kill-secrets" }
  | { kind: "restart-engine"; node: string }
  | { kind: "restart-etcd-member"; member: number }
  | { kind: "docker-rm"; pick: number }
  | { kind: "docker-stop"; pick: number };

export type FaultKind = Fault["kind"];

export function nextFault(rng: Rng, nodes: readonly string[], etcdMembers: number): Fault {
  const kind = rng.weighted<FaultKind>({
    "kill-orchestrator": 2,
    "kill-secrets": 1,
    "restart-engine": 1,
    "restart-etcd-member": 1,
    "docker-rm": 3,
    "docker-stop": 3,
  });
  switch (kind) {
    case "kill-orchestrator":
    case "kill-secrets":
      return { kind };
    case "restart-engine":
      return { kind, node: rng.pick(nodes) };
    case "restart-etcd-member":
      return { kind, member: rng.int(etcdMembers) };
    case "docker-rm":
    case "docker-stop":
      return { kind, pick: rng.float() };
  }
}

export function describeFault(f: Fault): string {
  switch (f.kind) {
    case "restart-engine":
      return `restart engine ${f.node}`;
    case "restart-etcd-member":
      return `restart etcd member ${f.member + 1}`;
    case "docker-rm":
    case "docker-stop":
      return `${f.kind === "docker-rm" ? "docker rm -f" : "docker stop"} of container #${f.pick.toFixed(3)}`;
    default:
      return f.kind;
  }
}

/** Inject `f`; answers what it hit (for the log). */
export async function injectFault(env: ChaosEnv, app: string, f: Fault): Promise<string> {
  switch (f.kind) {
    case "kill-orchestrator":
      await env.orchestrator.kill();
      await env.startOrchestrator();
      return "orchestrator SIGKILLed and started again";
    case "kill-secrets":
      env.secrets.child.kill("SIGKILL");
      await env.secrets.exited;
      await env.startSecrets();
      await env.secretsUp();
      await env.unseal();
      return "secrets process SIGKILLed, started again and unsealed";
    case "restart-engine":
      await env.servicesVerb("restart-engine", f.node, "1");
      return `engine ${f.node} restarted`;
    case "restart-etcd-member": {
      const member = env.etcd.members[f.member]!;
      await member.kill("SIGKILL");
      await member.start();
      return `etcd member ${member.name} SIGKILLed and started again`;
    }
    case "docker-rm":
    case "docker-stop": {
      const all = await env.engines.listContainers(undefined, { all: true, filters: { label: [`io.capstan.namespace=${app}`] } });
      const running = all.filter((c) => c.state === "running").sort((a, b) => a.name.localeCompare(b.name) || a.node.localeCompare(b.node));
      if (running.length === 0) return "no running container to hit";
      const c = running[Math.min(running.length - 1, Math.floor(f.pick * running.length))]!;
      if (f.kind === "docker-rm") await env.docker(c.node, "rm", "-f", c.id);
      else await env.docker(c.node, "stop", "-t", "1", c.id);
      return `${c.name} on ${c.node}`;
    }
  }
}
