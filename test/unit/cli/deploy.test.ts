// `capstan deploy` against in-process stand-ins of the console, the secrets service and the
// orchestrator (one HTTP server answering all three, as `capstan up` does): the checks come before
// any write, and what is written is the web proc's PodGroup.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { saveCluster } from "../../../cli/client-config.ts";
import { run as deploy } from "../../../cli/commands/deploy.ts";

interface Seen {
  method: string;
  url: string;
  body: string;
}

describe("capstan deploy", () => {
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  const savedHome = process.env.HOME;
  let server: Server;
  const seen: Seen[] = [];
  let registered = true;
  let written: string[] = [];
  let existing: unknown = undefined;
  let out = "";
  let err = "";

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        seen.push({ method: req.method!, url: req.url!, body });
        const json = (status: number, value: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
        const url = new URL(req.url!, "http://x");
        if (url.pathname.startsWith("/api/v1/repos/")) return registered ? json(200, { role: { role: "maintainer" } }) : json(404, { error: "app hello is not registered" });
        if (url.pathname === "/v2/secrets") return json(200, written.map((path) => ({ path, content: "x", owner: "root", group: "root", mode: "400", proc: url.searchParams.get("proc") })));
        if (url.pathname === "/api/podgroups" && req.method === "GET") return existing ? json(200, existing) : json(404, { code: "NotFound", message: "no such podgroup" });
        if (url.pathname === "/api/notify/routes/hello" && req.method === "GET") return json(200, { app: "hello", routes: {} });
        if (url.pathname === "/api/podgroups" && req.method === "POST") return json(202, { message: "accepted", checkUrl: "/api/podgroups?name=hello.web.web" });
        return json(500, { error: "unexpected" });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    saveCluster("test", { orchestrator: base, secrets: base, console: base, token: "cst_0123456789ab_t" }, home);
    writeFileSync(join(home, "app.yaml"), "appname: hello\nweb:\n  cmd: exec serve\n  secret_files: [config.yaml, /etc/key]\nworker:\n  cmd: x\n");
  });
  afterAll(async () => {
    process.env.HOME = savedHome;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(home, { recursive: true, force: true });
  });
  afterEach(() => {
    vi.restoreAllMocks();
    seen.length = 0;
    out = err = "";
  });

  async function run(argv: string[]): Promise<number> {
    process.env.HOME = home;
    vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
    vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
    return deploy(argv);
  }
  const writes = () => seen.filter((s) => s.method !== "GET");

  it("refuses an unregistered app before anything else", async () => {
    registered = false;
    expect(await run(["test", "-f", join(home, "app.yaml"), "-image", "img"])).toBe(1);
    expect(err).toContain("app hello is not registered with the console");
    expect(seen.map((s) => s.url)).toEqual(["/api/v1/repos/hello/roles/"]);
    registered = true;
  });

  it("lists every secret file not written, and writes nothing", async () => {
    written = ["/etc/key"];
    expect(await run(["test", "-f", join(home, "app.yaml"), "-image", "img"])).toBe(1);
    expect(err).toContain("not deployed: 1 secret file is not written for hello.web.web:\n  config.yaml\n");
    expect(seen.map((s) => s.url)).toContain("/v2/secrets?app=hello&proc=hello.web.web");
    expect(writes()).toEqual([]);
  });

  it("creates <app>.web.web with the command, a chosen PORT and the secret files; warns about unknown top-level keys", async () => {
    written = ["config.yaml", "/etc/key"];
    expect(await run(["test", "-f", join(home, "app.yaml"), "-image", "img", "-instances", "2", "-network", "none"])).toBe(0);
    expect(err).toMatch(/warning: .*app\.yaml:5: worker: unknown key, ignored/);
    const [post] = writes();
    const spec = JSON.parse(post!.body) as { name: string; numInstances: number; pod: { network: string; containers: { command: string[]; env: string[]; secretFiles: string[] }[] } };
    expect(spec).toMatchObject({ name: "hello.web.web", namespace: "hello", numInstances: 2, restartPolicy: "always", pod: { namespace: "hello", network: "none" } });
    const c = spec.pod.containers[0]!;
    expect(c.command).toEqual(["sh", "-c", "exec serve"]);
    expect(c.secretFiles).toEqual(["config.yaml", "/etc/key"]);
    const port = Number(c.env[0]!.replace("PORT=", ""));
    expect(port).toBeGreaterThanOrEqual(20_000);
    expect(port).toBeLessThan(40_000);
    expect(out).toBe(`podgroup/hello.web.web created (PORT=${port})\n`);
  });

  it("keeps the PORT the group already runs with when the file gives none", async () => {
    existing = { spec: { name: "hello.web.web", namespace: "hello", pod: { containers: [{ image: "old", env: ["PORT=23456"] }] } } };
    await run(["test", "-f", join(home, "app.yaml"), "-image", "img"]);
    const post = writes().find((s) => s.method === "POST");
    expect(JSON.parse(post!.body).pod.containers[0].env).toEqual(["PORT=23456"]);
    existing = undefined;
  });
});
