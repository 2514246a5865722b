// A PodGroup without restartPolicy is accepted with `never`, the original's zero value, in the API's
// schema (POST /api/podgroups) and in `capstan apply`'s files, which use the same schema.
import { describe, expect, it } from "vitest";
import { PodGroupSpecInput } from "../../../api/resources/podgroup.ts";
import { openApiDocument } from "../../../api/orchestrator/openapi.ts";
import { parseManifest } from "../../../cli/manifest.ts";

const body = { name: "web", namespace: "shop", numInstances: 1, pod: { namespace: "shop", containers: [{ image: "capstan/busybox:latest" }] } };

describe("restartPolicy", () => {
  it("defaults to never when omitted", () => {
    expect(PodGroupSpecInput.parse(body).restartPolicy).toBe("never");
    expect(parseManifest("name: web\nnamespace: shop\nnumInstances: 1\npod:\n  namespace: shop\n  containers:\n    - image: capstan/busybox:latest\n", "g.yaml")[0]!.restartPolicy).toBe("never");
  });

  it("still takes every policy, by name or code, and refuses others", () => {
    expect(PodGroupSpecInput.parse({ ...body, RestartPolicy: 1 }).restartPolicy).toBe("always");
    expect(PodGroupSpecInput.parse({ ...body, restartPolicy: "onfail" }).restartPolicy).toBe("onfail");
    expect(PodGroupSpecInput.safeParse({ ...body, restartPolicy: "sometimes" }).success).toBe(false);
    expect(PodGroupSpecInput.safeParse({ ...body, restartPolicy: null }).success).toBe(false);
  });

  it("is optional in the OpenAPI document", () => {
    const doc = openApiDocument() as { components: { schemas: Record<string, { required?: string[]; properties?: Record<string, unknown> }> } };
    const spec = doc.components.schemas.PodGroupSpec!;
    expect(spec.properties).toHaveProperty("restartPolicy");
    expect(spec.required).toEqual(["name", "namespace", "numInstances", "pod"]);
  });
});
