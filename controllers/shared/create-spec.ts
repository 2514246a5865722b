// From one container of a pod spec to the engine's create request: the part that is the same for
// a PodGroup instance and a dependency pod. The caller gives what differs (env with its CAPSTAN_*
// entries, labels, volume binds, the pod's kill timeout and network). Pure.
import type { CreateSpec } from "../../adapters/cluster/index.ts";
import type { ContainerSpec } from "../../api/resources/podgroup.ts";

export interface ContainerLimits {
  memoryBytes: number;
  nanoCpus: number;
}

export function containerLimits(c: ContainerSpec): ContainerLimits {
  return { memoryBytes: c.memoryLimit ?? 0, nanoCpus: Math.round((c.cpuLimit ?? 0) * 1e9) };
}

export interface CreateSpecInput {
  env: string[];
  labels: Record<string, string>;
  binds: string[];
  stopTimeoutSeconds: number;
  /** The pod's network; "" or absent: the engine's default. */
  network?: string | undefined;
}

/**
 * The create request of `c`. Restart policy "no": the controllers restart containers themselves,
 * with back-off, so the engine must not race them.
 */
export function containerCreateSpec(c: ContainerSpec, o: CreateSpecInput): { spec: CreateSpec; limits: ContainerLimits } {
  const limits = containerLimits(c);
  const spec: CreateSpec = { image: c.image, env: o.env, labels: o.labels, restartPolicy: { name: "no" }, stopTimeoutSeconds: o.stopTimeoutSeconds };
  if (c.command) spec.cmd = [...c.command];
  if (c.entrypoint) spec.entrypoint = [...c.entrypoint];
  if (c.user !== undefined) spec.user = c.user;
  if (c.workingDir !== undefined) spec.workingDir = c.workingDir;
  if (limits.memoryBytes > 0) spec.memoryBytes = limits.memoryBytes;
  if (limits.nanoCpus > 0) spec.nanoCpus = limits.nanoCpus;
  if (o.binds.length > 0) spec.binds = o.binds;
  if (o.network !== undefined && o.network !== "") spec.networkMode = o.network;
  if (c.expose !== undefined) spec.expose = [{ containerPort: c.expose }];
  if (c.logConfig) spec.logConfig = { type: c.logConfig.type, ...(c.logConfig.config && { config: { ...c.logConfig.config } }) };
  return { spec, limits };
}
