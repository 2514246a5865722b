// docs/deploy.md's example app.yaml, taken from the page itself, runs on the image the README names
// (capstan/busybox:latest: busybox's applets only, PATH=/bin): deployed with `capstan deploy` on a
// real `capstan up`, its web proc serves on $PORT (an earlier example exited 127: no such command).
// Only the app's name is made unique, since the engines are shared with other tests.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";
import { fencedBlocks } from "../unit/docs/command-blocks.ts";

const services = loadServices();

describe("docs/deploy.md's example app", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-deploy-doc-"));
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const app = uniqueName("docapp");
  const env = { HOME: home, CAPSTAN_SERVER: "", CAPSTAN_TOKEN: "", CAPSTAN_CA: "", CAPSTAN_CONTEXT: "" };
  const capstan = (args: string[]) => runCapstan(args, env, 120_000);
  let up: CapstanProcess;

  beforeAll(async () => {
    up = await startCapstan("up", ["-data", dir, "-cluster", services.cluster, "-registry-web", ""], { HOME: home });
    const admin = readFileSync(join(dir, "admin-token"), "utf8").trim();
    expect((await capstan(["login", "admin", "-url", up.url, "-token", admin])).code).toBe(0);
  }, 60_000);

  afterAll(async () => {
    if (up) {
      await capstan(["delete", "podgroup", `${app}.web.web`, "-context", "admin", "-wait", "-timeout", "60s"]);
      await up.stop();
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("deploys and serves on $PORT", async () => {
    const page = readFileSync(new URL("../../docs/deploy.md", import.meta.url), "utf8");
    const block = fencedBlocks("docs/deploy.md", page).find((b) => b.lang === "yaml" && b.body[0]?.startsWith("appname:"));
    expect(block, "docs/deploy.md has an app.yaml block").toBeDefined();
    const text = block!.body.join("\n").replace(/^appname: *\S+/m, `appname: ${app}`);
    const definition = parse(text) as { web: { secret_files?: string[] }; notify?: Record<string, string> };
    writeFileSync(join(dir, "app.yaml"), text);

    // The secrets service: capstan up may have initialized and unsealed it already.
    const status = JSON.parse((await capstan(["secrets", "status", "admin"])).stdout) as { initialized?: boolean; sealed?: boolean };
    if (status.initialized === false) {
      const init = await capstan(["secrets", "init", "admin", "-shares", "1", "-threshold", "1"]);
      const key = /^Unseal key 1: (\S+)$/m.exec(init.stdout)?.[1];
      expect(key, init.stderr).toBeDefined();
      expect((await capstan(["secrets", "unseal", "admin", "-key", key!])).stdout).toBe("unsealed\n");
    }
    await pollUntil("the secrets service unsealed", async () => (JSON.parse((await capstan(["secrets", "status", "admin"])).stdout) as { sealed?: boolean }).sealed === false, 30_000, 500);

    expect((await capstan(["apps", "add", "admin", app, "-maintainer", "alice@example.com"])).code).toBe(0);
    const token = (await capstan(["tokens", "create", "admin", "-user", "alice@example.com"])).stdout.trim();
    expect((await capstan(["login", "prod", "-url", up.url, "-token", token])).code).toBe(0);
    for (const path of definition.web.secret_files ?? []) {
      const r = await capstan(["secret", "add", "prod", `${app}.web.web`, path, "-c", `secret of ${path}\n`, "-mode", "440"]);
      expect(r.code, r.stderr).toBe(0);
    }
    const deployed = await capstan(["deploy", "prod", "-f", join(dir, "app.yaml"), "-image", "capstan/busybox:latest", "-network", "none", "-wait", "-timeout", "90s"]);
    expect(deployed.code, `${deployed.stdout}\n${deployed.stderr}`).toBe(0);
    // The definition's notify map is now the app's routes (docs/notify.md).
    expect(deployed.stdout).toContain(`notify routes of ${app} set`);
    const routes = await capstan(["notify", "routes", app, "-context", "prod", "-o", "json"]);
    expect(routes.code, routes.stderr).toBe(0);
    expect((JSON.parse(routes.stdout) as { routes: Record<string, string> }).routes).toEqual(definition.notify);

    // The web proc answers on $PORT inside its container.
    const group = JSON.parse((await capstan(["get", "podgroup", `${app}.web.web`, "-context", "prod", "-o", "json"])).stdout) as {
      spec: { pod: { containers: { env?: string[] }[] } };
    };
    const port = group.spec.pod.containers[0]!.env?.find((e) => e.startsWith("PORT="))?.slice(5);
    expect(port).toMatch(/^\d+$/);
    const answer = await pollUntil(
      `the web proc answering on port ${port}`,
      async () => {
        const r = await capstan(["exec", `${app}.web.web`, "-context", "prod", "--", "wget", "-qO-", `http://127.0.0.1:${port}/`]);
        return r.code === 0 ? r.stdout : undefined;
      },
      30_000,
      500,
    );
    expect(answer).toBe("hello\n");
  }, 240_000);
});
