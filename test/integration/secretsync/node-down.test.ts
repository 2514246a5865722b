// Secret-sync across an engine outage (the real engine n2 stopped and started again): while the
// node is unreachable its container's marker is kept (unknown is not gone) and the other node is
// served; once it is back, the change made meanwhile reaches the container that was on it.
import { afterAll, beforeAll, expect, it } from "vitest";
import { digestOf } from "../../../controllers/secretsync/index.ts";
import { servicesCommand } from "../../helpers/services.ts";
import { Harness, exec, readFileOf } from "./support.ts";

const h = new Harness();

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await servicesCommand("start-engine", "n2").catch(() => undefined); // never leave it down
  await h.cleanup();
});

it("keeps the marker of a container on an unreachable node, and catches up when the node is back", async () => {
  const proc = h.proc("down");
  await h.putSecret(proc, "cfg", "before-outage-31c");
  await h.putSpec(proc, [["cfg"]]);
  const up = await h.container(proc, "n1");
  const down = await h.container(proc, "n2");
  await h.cluster.start(up);
  await h.cluster.start(down);
  for (const ref of [up, down]) await h.until("first install", async () => (await h.marker(ref.id))?.files[0]?.digest === digestOf("before-outage-31c", "400"));

  await servicesCommand("stop-engine", "n2");
  try {
    await h.until("n2 seen unreachable", async () => h.ss?.cache.nodeState("n2") === "unreachable", 10_000);
    await h.putSecret(proc, "cfg", "during-outage-5ab");
    await h.until("n1 container follows", async () => (await exec(up, "cat /platform/app/cfg")) === "during-outage-5ab", 10_000);
    // The n2 container is unknown, not gone: its marker stays, with the old digest.
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await h.marker(down.id))?.files[0]?.digest).toBe(digestOf("before-outage-31c", "400"));
  } finally {
    await servicesCommand("start-engine", "n2");
  }

  // The engine stopped the container with itself; the file is installed into it all the same, so
  // it starts with the current content.
  await h.until("n2 container catches up", async () => (await h.marker(down.id))?.files[0]?.digest === digestOf("during-outage-5ab", "400"), 20_000);
  expect(await readFileOf(down, "/platform/app/cfg")).toEqual({ uid: 0, gid: 0, mode: 0o400, content: "during-outage-5ab" });
});
