// The OpenAPI 3.1 document of the orchestrator's PodGroup API, served at GET /api/openapi.json.
// Generated from the zod schemas: request bodies from api/resources (input form: integer enum codes
// accepted), answers from ./responses.ts, query parameters from ./queries.ts. Built once, on
// first request.
import { z } from "zod";
import { ContainerSpec, PodGroupSpec, PodSpec } from "../resources/podgroup.ts";
import { maxJsonBodyBytes } from "../http/index.ts";
import { DriftAcceptedSchema, DriftQuery, NodeSchema } from "./node-schemas.ts";
import { DependsDeleteQuery, DependsGetQuery } from "./depends.ts";
import { DependencyPodStatusSchema, DependencyWithStatusSchema, StoredDependencySchema } from "./depends-schemas.ts";
import { DependencySpec } from "../resources/dependency.ts";
import { DeleteQuery, GetQuery, LogsQuery, ReplicaQuery, RestartQuery } from "./queries.ts";
import {
  AcceptedSchema,
  BadRequestSchema,
  ContainerStatusSchema,
  InternalErrorSchema,
  LogRecordSchema,
  NotAllowedSchema,
  NotFoundSchema,
  PodGroupWithSpecSchema,
  PodStatusSchema,
  StoredPodGroupSchema,
  UnavailableSchema,
} from "./responses.ts";

type JsonObject = Record<string, unknown>;

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** Component schemas generated from `schemas` (each referenced by id from the others). */
function components(schemas: Record<string, z.ZodType>, io: "input" | "output"): Record<string, JsonObject> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const generated = z.toJSONSchema(registry, { io, uri: (id) => `#/components/schemas/${id}` }).schemas;
  const out: Record<string, JsonObject> = {};
  for (const [id, schema] of Object.entries(generated)) {
    // Each is a standalone JSON Schema document; inside an OpenAPI document they are fragments.
    const { $schema: _s, $id: _i, ...fragment } = schema as JsonObject;
    out[id] = fragment;
  }
  return out;
}

/** Query parameters from a zod object schema of string fields; `optional` overrides required-ness. */
function queryParameters(schema: z.ZodObject, optional: readonly string[] = []): JsonObject[] {
  const json = z.toJSONSchema(schema, { io: "input" }) as { properties?: Record<string, JsonObject>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: "query",
      required: (json.required ?? []).includes(name) && !optional.includes(name),
      ...(description !== undefined && { description }),
      schema: rest,
    };
  });
}

const json = (schema: JsonObject) => ({ "application/json": { schema } });
const answer = (description: string, id: string) => ({ description, content: json(ref(id)) });

const errors = {
  "400": answer("Bad input (details name every field); nothing was stored", "BadRequest"),
  "404": answer("No PodGroup of that name", "NotFound"),
  "409": answer("AlreadyExists (use PATCH), or InsufficientResources (the cluster cannot fit it)", "NotAllowed"),
  "500": answer("A bug; see the server log", "InternalError"),
  "503": answer("The store did not answer in time; retry", "Unavailable"),
};

function pick<K extends keyof typeof errors>(...codes: K[]) {
  return Object.fromEntries(codes.map((k) => [k, errors[k]]));
}

/**
 * Every operation needs a token (docs/security.md): the two ways to send it, and the 401 and 403
 * answers, added to each operation.
 */
function withSecurity(doc: JsonObject): JsonObject {
  const paths = doc.paths as Record<string, Record<string, JsonObject>>;
  const problem = { type: "object", required: ["code", "message"], properties: { code: { type: "string" }, message: { type: "string" }, missing: { type: "string" } } };
  for (const methods of Object.values(paths)) {
    for (const op of Object.values(methods)) {
      op.responses = {
        ...(op.responses as JsonObject),
        "401": { description: "No token, or a malformed, unknown, expired or revoked one (WWW-Authenticate: Bearer); nothing was stored", content: json(problem) },
        "403": { description: "The token lacks the permission `missing` names (role, app, host access); nothing was stored", content: json(problem) },
      };
    }
  }
  const components = doc.components as JsonObject;
  components.securitySchemes = {
    bearer: { type: "http", scheme: "bearer", description: "A console access token (cst_...)" },
    accessToken: { type: "apiKey", in: "header", name: "access-token", description: "The same token, in the spec's header" },
  };
  return { ...doc, security: [{ bearer: [] }, { accessToken: [] }] };
}

function build(): JsonObject {
  return withSecurity(buildPaths());
}

function buildPaths(): JsonObject {
  const accepted = answer("Recorded; the controller carries it out. Follow checkUrl.", "Accepted");
  const bodyNote = `JSON, at most ${maxJsonBodyBytes} bytes, content-type application/json. Keys are matched case-insensitively (NumInstances works); enums accept their integer codes; unknown fields are refused.`;
  return {
    openapi: "3.1.0",
    info: {
      title: "Capstan orchestrator: PodGroups",
      version: "1",
      description:
        "Writes desired state and answers 202; the PodGroup controller converges Docker engines to it. " +
        "Every call needs a console access token (Authorization: Bearer, or the access-token header). " +
        "Errors: 400 BadRequest, 401 Unauthorized, 403 Forbidden, 404 NotFound, 409 NotAllowed (reason AlreadyExists | InsufficientResources), 503 Unavailable.",
    },
    paths: {
      "/api/podgroups": {
        get: {
          operationId: "getPodGroup",
          summary: "A PodGroup's spec and runtime state",
          parameters: queryParameters(GetQuery),
          responses: { "200": answer("The group", "PodGroupWithSpec"), ...pick("400", "404", "500", "503") },
        },
        post: {
          operationId: "createPodGroup",
          summary: "Create a PodGroup and deploy its instances",
          requestBody: { required: true, description: bodyNote, content: json(ref("PodGroupSpec")) },
          responses: { "202": accepted, ...pick("400", "409", "500", "503") },
        },
        delete: {
          operationId: "deletePodGroup",
          summary: "Remove a PodGroup and all its instances",
          parameters: queryParameters(DeleteQuery),
          responses: { "202": accepted, ...pick("400", "404", "500", "503") },
        },
        patch: {
          operationId: "patchPodGroup",
          summary: "cmd=replica: change num_instances and restart_policy; cmd=spec: replace the pod spec (body), rolled out one instance at a time",
          parameters: queryParameters(ReplicaQuery, ["num_instances"]),
          requestBody: { required: false, description: `cmd=spec only: the new PodSpec. ${bodyNote}`, content: json(ref("PodSpec")) },
          responses: { "202": accepted, ...pick("400", "404", "409", "500", "503") },
        },
      },
      "/api/podgroups/_all": {
        get: {
          operationId: "listPodGroups",
          summary: "Every PodGroup with its runtime state, in name order",
          responses: {
            "200": { description: "All groups", content: json({ type: "array", items: ref("PodGroupWithSpec") }) },
            ...pick("500", "503"),
          },
        },
      },
      "/api/podgroups/restart": {
        post: {
          operationId: "restartPodGroup",
          summary:
            "A rolling restart: every instance is replaced by a fresh container, one at a time, as a spec update is rolled out (pod.version stays). " +
            "Needs write on the group's app",
          parameters: queryParameters(RestartQuery),
          responses: { "202": accepted, ...pick("400", "404", "500", "503") },
        },
      },
      "/api/podgroups/logs": {
        get: {
          operationId: "podGroupLogs",
          summary:
            "A PodGroup's container logs, streamed: one instance, or every instance merged (by time; with follow=true as lines arrive). " +
            "text/plain lines `INSTANCE@NODE STREAM [TIME ]LINE` (STREAM stdout, stderr or error), or with Accept: application/x-ndjson one LogRecord per line",
          parameters: queryParameters(LogsQuery),
          responses: {
            "200": {
              description: "The lines, streamed; with follow=true until the client disconnects or the containers stop",
              content: { "text/plain": { schema: { type: "string" } }, "application/x-ndjson": { schema: ref("LogRecord") } },
            },
            ...pick("400", "500"),
            "404": answer(
              "No PodGroup of that name, no such instance, an instance without a container (with previous=true: without a previous container), or containers the engines no longer have",
              "NotFound",
            ),
            "503": answer("The store did not answer in time, or no container's log could be read (the message says why); retry", "Unavailable"),
          },
        },
      },
      "/api/nodes": {
        get: {
          operationId: "listNodes",
          summary: "Every cluster node as the node monitor last recorded it, in name order (never calls Docker)",
          responses: { "200": { description: "The nodes", content: json({ type: "array", items: ref("Node") }) }, ...pick("500") },
        },
        patch: {
          operationId: "driftNode",
          summary: "cmd=drift: move instances off node `from` (a durable task; stateful PodGroups only with force=true)",
          parameters: queryParameters(DriftQuery),
          responses: {
            "202": answer("The drift task is recorded; the PodGroup controller carries it out", "DriftAccepted"),
            ...pick("400", "404", "500", "503"),
          },
        },
      },
      "/api/depends": {
        get: {
          operationId: "getDependency",
          summary: "A dependency's definition and its pods (per node and namespace: refCount, verifyTime, state, containers)",
          parameters: queryParameters(DependsGetQuery),
          responses: { "200": answer("The dependency", "DependencyWithStatus"), ...pick("400", "500", "503"), "404": answer("No dependency of that name", "NotFound") },
        },
        post: {
          operationId: "createDependency",
          summary: "Store a dependency (AddSpec); nothing is deployed until a PodGroup instance that lists it runs on a node",
          requestBody: { required: true, description: bodyNote, content: json(ref("DependencySpec")) },
          responses: { "202": accepted, ...pick("400", "500", "503"), "409": answer("AlreadyExists (use PUT), or InsufficientResources (the pod fits on no ready node)", "NotAllowed") },
        },
        put: {
          operationId: "updateDependency",
          summary: "Replace a dependency's pod (UpdateSpec); its running pods are upgraded one at a time",
          requestBody: { required: true, description: bodyNote, content: json(ref("DependencySpec")) },
          responses: { "202": accepted, ...pick("400", "500", "503"), "404": answer("No dependency of that name", "NotFound") },
        },
        delete: {
          operationId: "deleteDependency",
          summary: "Remove a dependency and its pods (RemoveSpec); refused while PodGroups list it unless force=true",
          parameters: queryParameters(DependsDeleteQuery),
          responses: {
            "202": accepted,
            ...pick("400", "500", "503"),
            "404": answer("No dependency of that name", "NotFound"),
            "409": answer("InUse: PodGroups list it (named in the message); delete them first or use force=true", "NotAllowed"),
          },
        },
      },
      "/api/depends/_all": {
        get: {
          operationId: "listDependencies",
          summary: "Every dependency with its pods, in name order",
          responses: { "200": { description: "All dependencies", content: json({ type: "array", items: ref("DependencyWithStatus") }) }, ...pick("500", "503") },
        },
      },
      "/api/openapi.json": {
        get: {
          operationId: "openApiDocument",
          summary: "This document",
          responses: { "200": { description: "OpenAPI 3.1", content: json({ type: "object" }) } },
        },
      },
    },
    components: {
      schemas: {
        ...components({ ContainerSpec, PodSpec, PodGroupSpec, DependencySpec }, "input"),
        ...components(
          {
            ContainerSpec,
            PodGroupWithSpec: PodGroupWithSpecSchema,
            StoredPodGroup: StoredPodGroupSchema,
            PodStatus: PodStatusSchema,
            ContainerStatus: ContainerStatusSchema,
            Accepted: AcceptedSchema,
            BadRequest: BadRequestSchema,
            NotFound: NotFoundSchema,
            NotAllowed: NotAllowedSchema,
            Unavailable: UnavailableSchema,
            InternalError: InternalErrorSchema,
            LogRecord: LogRecordSchema,
            Node: NodeSchema,
            DriftAccepted: DriftAcceptedSchema,
            DependencyWithStatus: DependencyWithStatusSchema,
            StoredDependency: StoredDependencySchema,
            DependencyPodStatus: DependencyPodStatusSchema,
          },
          "output",
        ),
      },
    },
  };
}

let document: JsonObject | undefined;

export function openApiDocument(): JsonObject {
  document ??= build();
  return document;
}
