// `capstan get depends [NAME]` against the Dependency API served over HTTP on loopback, backed by
// the shared etcd: the table shows the pods per node and namespace, -o json the server's answer.
import { serve, type ServerType } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { run as get } from "../../../cli/commands/get.ts";
import { Harness } from "./harness.ts";

const h = new Harness();
let server: ServerType | undefined;
let base = "";

beforeAll(async () => {
  await h.start();
  await new Promise<void>((resolve) => {
    server = serve({ fetch: h.api.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
      base = `http://127.0.0.1:${info.port}`;
      resolve();
    });
  });
});
afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await h.cleanup();
});

async function capture(argv: string[]): Promise<{ code: number; out: string }> {
  let out = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    return { code: await get([...argv, "-server", base]), out };
  } finally {
    spy.mockRestore();
  }
}

describe("capstan get depends", () => {
  it("shows a dependency's pods per node and namespace, lists all, and prints JSON with -o json", async () => {
    const dep = h.name("d");
    await h.createDependency(dep);
    await h.putGroup(h.name("g"), "ns-a", [{ podName: dep, policy: "namespace" }], ["n1"]);
    await h.putGroup(h.name("g"), "ns-b", [{ podName: dep, policy: "node" }], ["n2"]);
    await h.until("both pods running", async () => (await h.status(dep))?.state === "running" && (await h.status(dep))!.pods.length === 2);
    // The API answers from its informers, which may be a moment behind the store read above.
    let one = { code: -1, out: "" };
    await h.until("the API to show both pods running", async () => {
      one = await capture(["depends", dep]);
      return new RegExp(`\\n${dep} +running +2/2 `).test(`\n${one.out}`);
    });
    expect(one.code).toBe(0);
    expect(one.out).toMatch(new RegExp(`^DEPENDENCY +STATE +PODS +VERSION +LAST ERROR\\n${dep} +running +2/2 +1 +-\\n`));
    expect(one.out).toMatch(/\nn1 +ns-a +running +1 +1 +0 +- +\S+\.v1-n1-Nns-a running/);
    expect(one.out).toMatch(/\nn2 +\(all\) +running +1 +1 +0 +- +\S+\.v1-n2 running/);

    const list = await capture(["depends"]);
    expect(list.out).toMatch(new RegExp(`\\n${dep} +running +2/2 +1 +2 +-\\n`));

    const json = await capture(["depends", dep, "-o", "json"]);
    expect(JSON.parse(json.out)).toMatchObject({ spec: { name: dep, version: 1 }, pods: [{ node: "n1", namespace: "ns-a" }, { node: "n2", namespace: "" }] });
  });

  it("reports a 404 with exit code 1", async () => {
    const errors = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect((await capture(["depends", h.name("none")])).code).toBe(1);
      expect(String(errors.mock.calls[0]?.[0])).toMatch(/NotFound/);
    } finally {
      errors.mockRestore();
    }
  });
});
