// The orchestrator's own options, shared by `capstan orchestrator` and `capstan up` (docs/cli.md,
// "Server commands: `capstan up` and `capstan orchestrator`"), and the settings the assembly
// takes from them.
import { readPemOption } from "./option-files.ts";
import { UsageError, type OptionDef } from "./options.ts";

export const orchestratorOptionDefs: OptionDef[] = [
  { name: "update-wait", type: "duration", help: "spec update: wait between removing an instance and deploying its replacement", default: "10s" },
  { name: "refresh-interval", type: "duration", help: "full refresh of every PodGroup against the engines (jittered; Docker events repair at once)", default: "30s" },
  { name: "depends-gc", type: "duration", help: "reclaim a dependency pod once nothing has referenced it for this long", default: "5m" },
  { name: "workers", type: "int", help: "PodGroups reconciled in parallel", default: 8 },
  { name: "node-timeout", type: "duration", help: "a node unreachable this long has its non-stateful instances drifted to other nodes", default: "60s" },
  {
    name: "lease-duration",
    type: "duration",
    help: "leader lease: a crashed leader is replaced within this long (whole seconds, at least 2s); the leader steps down after 2/3 of it without a renewal (docs/high-availability.md)",
    default: "15s",
  },
  { name: "event-ttl", type: "duration", help: "events not seen again for this long are deleted, 1h when not given (at most the newest 5000 are kept; docs/events.md)" },
  {
    name: "registry-token-file",
    type: "string",
    help:
      "a console access token (role sync) the orchestrator asks the console's registry token endpoint with for a pull-only token per repository of -registry-host; " +
      "only that token reaches the engines, this one never leaves the process; re-read when a token is needed (capstan up: DATA/controllers-token, made for it)",
  },
  {
    name: "registry-host",
    type: "string",
    help: "HOST:PORT of the platform's registry: images whose reference starts with it are pulled with a token from -registry-token-file's identity, others anonymously (capstan up: -registry-web's address)",
  },
  {
    name: "registry-ca",
    type: "string",
    help: "a CA certificate (PEM file) trusted, besides the system roots, for HTTPS to the registry token endpoint and the registry (capstan up with -tls-cert: that certificate)",
  },
];

export interface OrchestratorSettings {
  updateWaitMs: number;
  refreshIntervalMs: number;
  workers: number;
  /** -depends-gc: an unreferenced dependency pod is reclaimed after this long. */
  dependsGcMs: number;
  /** -node-timeout: a node unreachable this long gets an auto-drift task. */
  nodeTimeoutMs: number;
  /** -lease-duration: the leader election's lease and the timings derived from it. */
  lease?: LeaseTimings;
  /** -event-ttl: events not seen again for this long are pruned (docs/events.md; default 1 h). */
  eventTtlMs?: number;
  /**
   * -registry-token-file: the console access token the orchestrator gets pull-only registry tokens
   * with, for the images of registryHost (it stays in the orchestrator process).
   */
  registryTokenFile?: string;
  /** -registry-host: the registry (HOST:PORT) registryTokenFile's token is for. */
  registryHost?: string;
  /** -registry-ca: PEM text, trusted besides the system roots for the realm's and registry's HTTPS. */
  registryCa?: string;
  /**
   * The registry token endpoint to call instead of the realm published in the store (no option:
   * `capstan up` without HTTPS sets its own address on loopback).
   */
  registryRealm?: string;
}

/**
 * The leader election's timings for a lease of `leaseDurationMs` (docs/high-availability.md): the
 * leader steps down after 2/3 of the lease without a successful renewal, so it stops acting before
 * the store lets anyone else be elected; a follower looks again every fifth of that (at most 2 s),
 * keeping client-go's constraints (lease > renew deadline > 1.2 x retry period). 15 s gives the
 * elector's defaults: 15 s, 10 s, 2 s.
 */
export interface LeaseTimings {
  ttlSeconds: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export function leaseTimings(leaseDurationMs: number): LeaseTimings {
  // etcd leases count whole seconds, and 2 s is etcd's minimum TTL (it raises a shorter one).
  if (!Number.isInteger(leaseDurationMs / 1000) || leaseDurationMs < 2000) {
    throw new UsageError("-lease-duration: must be whole seconds, at least 2s");
  }
  // Past an hour a crashed leader would leave the controllers stopped for longer than any operator waits.
  if (leaseDurationMs > 3_600_000) throw new UsageError("-lease-duration: must be at most 1h");
  const renewDeadlineMs = Math.round((leaseDurationMs * 2) / 3);
  return { ttlSeconds: leaseDurationMs / 1000, renewDeadlineMs, retryPeriodMs: Math.min(2000, Math.floor(renewDeadlineMs / 5)) };
}

/** `host[:port]` as an image reference starts: a name or IPv4 address, or a bracketed IPv6 one. */
const registryHostPattern = /^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$/;

/** Settings from options parsed with orchestratorOptionDefs. */
export function orchestratorSettings(options: Record<string, unknown>): OrchestratorSettings {
  const workers = options.workers as number;
  const refreshIntervalMs = options["refresh-interval"] as number;
  if (workers < 1) throw new UsageError(`-workers: ${workers} must be at least 1`);
  // 0 would mean "refresh every group continuously": a busy loop against the engines.
  if (refreshIntervalMs <= 0) throw new UsageError("-refresh-interval: must be more than 0");
  const nodeTimeoutMs = options["node-timeout"] as number;
  // 0 would drift a node's instances away at its first missed answer.
  if (nodeTimeoutMs <= 0) throw new UsageError("-node-timeout: must be more than 0");
  const eventTtlMs = options["event-ttl"] as number | undefined;
  // 0 would delete every event as soon as it is written.
  if (eventTtlMs !== undefined && eventTtlMs <= 0) throw new UsageError("-event-ttl: must be more than 0");
  const registryTokenFile = nonEmpty(options["registry-token-file"]);
  const registryHost = nonEmpty(options["registry-host"]);
  if (registryHost !== undefined && !registryHostPattern.test(registryHost)) {
    throw new UsageError(`-registry-host: "${registryHost}" is not HOST[:PORT] (no scheme, no path), e.g. 127.0.0.1:5000`);
  }
  if (registryTokenFile !== undefined && registryHost === undefined) {
    throw new UsageError("-registry-token-file needs -registry-host: the registry whose images the token pulls");
  }
  const registryCaFile = nonEmpty(options["registry-ca"]);
  const registryCa = registryCaFile === undefined ? undefined : readPemOption("registry-ca", registryCaFile, "CERTIFICATE");
  const lease = leaseTimings((options["lease-duration"] as number | undefined) ?? 15_000);
  return {
    updateWaitMs: options["update-wait"] as number,
    lease,
    refreshIntervalMs,
    workers,
    dependsGcMs: options["depends-gc"] as number,
    nodeTimeoutMs,
    ...(eventTtlMs !== undefined && { eventTtlMs }),
    ...(registryTokenFile !== undefined && { registryTokenFile }),
    ...(registryHost !== undefined && { registryHost }),
    ...(registryCa !== undefined && { registryCa }),
  };
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}
