// Query parameters of the PodGroup endpoints, as zod schemas: the handlers validate with them and
// the OpenAPI document lists them from them. Names are docs/api-reference.md's (snake_case). `since`
// is the logs' and the events' alike.
import { z } from "zod";
import { queryBoolean, queryCount, systemWallClock, type WallClock } from "../http/index.ts";
import { firstInstanceNo, instanceNumbersFrom, Name, PodGroupSpec, restartPolicies, type RestartPolicy } from "../resources/podgroup.ts";
import { parseSince } from "./log-lines.ts";

const maxInstances = PodGroupSpec.shape.numInstances.maxValue ?? 1000;

/** An `instance` parameter: an instanceNo, 1..the most instances a group can have (0 is refused: instances are numbered from 1). */
export const instanceParam = queryCount(maxInstances).pipe(z.number().min(firstInstanceNo, `must be at least ${firstInstanceNo}: ${instanceNumbersFrom}`));

/** never, always, onfail, or the original system's codes 0 (never), 1 (always), 2 (onfail). */
const restartPolicyParam = z
  .enum([...restartPolicies, "0", "1", "2"], { error: "must be one of never, always, onfail (or 0, 1, 2)" })
  .transform((v): RestartPolicy => (v === "0" ? "never" : v === "1" ? "always" : v === "2" ? "onfail" : v));

export const GetQuery = z.object({
  name: Name.describe("PodGroup name"),
  force_update: queryBoolean.optional().describe("true: ask the controller to refresh the group now (the answer is the current state)"),
});

export const DeleteQuery = z.object({ name: Name.describe("PodGroup name") });
export const HistoryQuery = z.object({ name: Name.describe("PodGroup name") });

/** POST /api/podgroups/restart: a rolling restart of the group (docs/orchestrator.md, "Restart"). */
export const RestartQuery = z.object({ name: Name.describe("PodGroup name") });

export const patchCommands = ["replica", "spec"] as const;

export const PatchQuery = z.object({
  name: Name.describe("PodGroup name"),
  cmd: z.enum(patchCommands, { error: "must be replica or spec" }).describe("replica: change num_instances / restart_policy; spec: replace the pod spec (body)"),
});

export const ReplicaQuery = PatchQuery.extend({
  num_instances: queryCount(maxInstances).describe(`cmd=replica: the new number of instances (0..${maxInstances}); required`),
  restart_policy: restartPolicyParam.optional().describe("cmd=replica: never, always or onfail (or 0, 1, 2); unchanged when absent"),
});

/** The most lines `tail` asks for per container (the engine reads a log backwards for them). */
export const maxLogTail = 1_000_000;

/**
 * A duration ago (10m) or an RFC 3339 time, as milliseconds since the epoch, read at request time
 * from `clock` (the logs' and the events' `since`).
 */
export function sinceParam(clock: WallClock) {
  return z.string().transform((text, ctx) => {
    const since = parseSince(text, clock.now());
    if ("error" in since) {
      ctx.addIssue({ code: "custom", message: since.error });
      return z.NEVER;
    }
    return since.ms;
  });
}

/** GET /api/podgroups/logs's parameters, `since` read from `clock`. */
export const logsQuery = (clock: WallClock) => z.object({
  name: Name.describe("PodGroup name"),
  instance: instanceParam.optional().describe("one instance (its instanceNo, from 1); absent: every instance, merged"),
  follow: queryBoolean.optional().describe("true: keep streaming new lines until the client disconnects (or the containers stop)"),
  tail: queryCount(maxLogTail).optional().describe("only the last N lines of each container; absent: all"),
  since: sinceParam(clock).optional().describe("only lines since a duration ago (10m, 1h30m) or since an RFC 3339 time (2026-11-23T01:00:00Z)"),
  timestamps: queryBoolean.optional().describe("true: show each line's time (RFC 3339, UTC, nanoseconds)"),
  previous: queryBoolean
    .optional()
    .describe("true: the instance's previous containers (the run before the current one: restarted in place, or replaced by a rollout); needs instance; follow is ignored"),
});

export const LogsQuery = logsQuery(systemWallClock);
