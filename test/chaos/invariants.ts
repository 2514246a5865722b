// The chaos suite's invariant checker (docs/development.md, "Chaos suite"): a plain function over
// the desired state (what the run asked for through the API), the containers listed directly from
// every engine by label, the status the API serves, and the secret files read out of the
// containers. It answers every violation it finds; an empty list means the engines match.

export interface DesiredGroup {
  name: string;
  numInstances: number;
  /** The pod version the spec is at (from the API's spec). */
  version: number;
  /** Secret files each container must hold: absolute path in the container -> content. */
  secretFiles: Record<string, string>;
}

export interface ObservedContainer {
  id: string;
  name: string;
  node: string;
  /** io.capstan.podgroup */
  group: string;
  /** io.capstan.instance */
  instance: string;
  /** io.capstan.version */
  version: string;
  /** The engine's state: running, exited, created, ... */
  state: string;
  /** A kept previous container of a rollout (not an instance: docs/podgroup-controller.md). */
  previous: boolean;
  /** Secret files read from the container: path -> content, or null when the file is missing. */
  files?: Record<string, string | null>;
}

export interface StatusGroup {
  name: string;
  pods: { instanceNo: number; containers: { id: string; status: string }[] }[];
}

export type ViolationKind = "count" | "duplicate" | "orphan" | "version" | "status" | "secret";

export interface Violation {
  kind: ViolationKind;
  group: string;
  detail: string;
}

export function checkInvariants(desired: DesiredGroup[], observed: ObservedContainer[], status: StatusGroup[]): Violation[] {
  const violations: Violation[] = [];
  const add = (kind: ViolationKind, group: string, detail: string) => violations.push({ kind, group, detail });
  const wanted = new Map(desired.map((g) => [g.name, g]));
  const statusOf = new Map(status.map((s) => [s.name, s]));

  for (const c of observed) {
    if (!wanted.has(c.group)) add("orphan", c.group, `container ${c.name} (${c.state}) on ${c.node} belongs to no desired group`);
  }
  for (const s of status) {
    if (!wanted.has(s.name)) add("status", s.name, `the API still serves a group that was deleted`);
  }

  for (const g of desired) {
    const mine = observed.filter((c) => c.group === g.name && !c.previous);
    const byInstance = new Map<string, ObservedContainer[]>();
    for (const c of mine) byInstance.set(c.instance, [...(byInstance.get(c.instance) ?? []), c]);
    for (const [instance, cs] of byInstance) {
      if (cs.length > 1) add("duplicate", g.name, `instance ${instance} has ${cs.length} containers: ${cs.map((c) => `${c.name}@${c.node}`).join(", ")}`);
    }
    const running = mine.filter((c) => c.state === "running");
    if (mine.length !== g.numInstances || running.length !== g.numInstances || byInstance.size !== g.numInstances) {
      add("count", g.name, `want ${g.numInstances} running instance(s); engines hold ${mine.length} container(s), ${running.length} running, ${byInstance.size} distinct instance(s)`);
    }
    for (const c of mine) {
      if (c.version !== String(g.version)) add("version", g.name, `${c.name} runs version ${c.version}, the spec is at ${g.version}`);
    }

    const s = statusOf.get(g.name);
    if (!s) {
      add("status", g.name, "the API serves no status for a desired group");
    } else {
      const engine = new Map(mine.map((c) => [c.id, c]));
      const listed = s.pods.flatMap((p) => p.containers);
      const listedIds = new Set(listed.map((c) => c.id));
      for (const c of listed) {
        const e = engine.get(c.id);
        if (!e) add("status", g.name, `status names container ${c.id.slice(0, 12)} (${c.status}) that no engine holds`);
        else if (e.state !== c.status) add("status", g.name, `status says ${e.name} is ${c.status}, its engine says ${e.state}`);
      }
      for (const c of mine) if (!listedIds.has(c.id)) add("status", g.name, `status does not name ${c.name} on ${c.node}`);
      if (s.pods.length !== g.numInstances) add("status", g.name, `status lists ${s.pods.length} pod(s), want ${g.numInstances}`);
    }

    for (const c of running) {
      for (const [path, content] of Object.entries(g.secretFiles)) {
        const seen = c.files?.[path];
        if (seen === undefined || seen === null) add("secret", g.name, `${c.name}: secret file ${path} is missing`);
        else if (seen !== content) add("secret", g.name, `${c.name}: secret file ${path} differs from the store`);
      }
    }
  }
  return violations;
}
