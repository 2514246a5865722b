// From source to a running app (docs/build.md), all real: `capstan build`, `test` and `release` on
// engine n1 as the developer's engine, the release pushed to a real `capstan up`'s registry with a
// maintainer's console token, `capstan deploy` without -image running the newest release and
// -release rolling back to the older one; the running container holds (and serves) the built file.
// The app uses build.prepare, so the prepare image is made once and reused as the build's base.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listTags } from "../../adapters/build/registry-tags.ts";
import { runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName } from "../helpers/services.ts";

const services = loadServices();
const exec = promisify(execFile);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const definition = (app: string) => `appname: ${app}
build:
  base: ${services.testImage}
  prepare:
    version: "1"
    script:
      - mkdir -p /opt/tools && echo tool-ok > /opt/tools/t
  script:
    - mkdir -p out
    - echo "built from $(cat src.txt) with $(cat /opt/tools/t)" > out/hello.txt
    - echo build-output-line
release:
  dest_base: ${services.testImage}
  copy:
    - src: out/hello.txt
      dest: /srv/www/hello.txt
test:
  script:
    - grep -q "built from" out/hello.txt
web:
  cmd: exec httpd -f -p $PORT -h /srv/www
`;

describe("capstan build, test, release, releases and deploy of the newest release", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-build-e2e-"));
  const home = join(dir, "home");
  const src = join(dir, "src");
  const app = uniqueName("bld");
  const engine = services.engines.n1!;
  const env = { HOME: home, DOCKER_HOST: engine, CAPSTAN_SERVER: "", CAPSTAN_TOKEN: "", CAPSTAN_CA: "", CAPSTAN_CONTEXT: "" };
  const capstan = (args: string[]) => runCapstan(args, env, 180_000);
  const docker = (args: string[]) => exec("docker", ["-H", engine, ...args], { timeout: 60_000 });
  let up: CapstanProcess;
  let registry = "";
  let aliceToken = "";
  const file = join(src, "app.yaml");

  beforeAll(async () => {
    mkdirSync(home);
    mkdirSync(src);
    writeFileSync(file, definition(app));
    writeFileSync(join(src, "src.txt"), "v1\n");
    // Excluded from the source archive and the cache key (docs/build.md, "What is sent").
    writeFileSync(join(src, ".dockerignore"), "*.log\n");
    // The realm up publishes is its -web address: a fixed port (see test/e2e/registry.test.ts).
    const [webPort, registryPort] = [await freePort(), await freePort()];
    registry = `127.0.0.1:${registryPort}`;
    up = await startCapstan("up", ["-web", `127.0.0.1:${webPort}`, "-registry-web", registry, "-data", join(dir, "up"), "-cluster", `n1=${engine}`], { HOME: home });
    await pollUntil(
      "the registry challenging with the console's realm",
      async () => {
        const res = await fetch(`http://${registry}/v2/`);
        await res.arrayBuffer();
        return res.status === 401 && res.headers.get("www-authenticate")?.includes("/api/v1/authorize/registry/");
      },
      30_000,
    );
    const admin = readFileSync(join(dir, "up", "admin-token"), "utf8").trim();
    expect((await capstan(["login", "admin", "-url", up.url, "-token", admin])).code).toBe(0);
    expect((await capstan(["apps", "add", "admin", app, "-maintainer", "alice@example.com"])).code).toBe(0);
    aliceToken = (await capstan(["tokens", "create", "admin", "-user", "alice@example.com"])).stdout.trim();
    expect((await capstan(["login", "prod", "-url", up.url, "-token", aliceToken])).code).toBe(0);
  }, 90_000);

  afterAll(async () => {
    if (up) {
      await capstan(["delete", "podgroup", `${app}.web.web`, "-context", "admin", "-wait", "-timeout", "60s"]);
      await up.stop();
    }
    // Every image this app made on n1 (build, prepare, release, meta): all carry the app's label.
    // Two passes: a prepare image goes only once the build images made from it are gone.
    for (let pass = 0; pass < 2; pass++) {
      const ids = (await docker(["images", "-q", "--filter", `label=capstan.build.app=${app}`]).catch(() => ({ stdout: "" }))).stdout.split("\n").filter(Boolean);
      for (const id of new Set(ids)) await docker(["rmi", "-f", id]).catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const imageId = async (ref: string) => (await docker(["image", "inspect", "-f", "{{.Id}}", ref])).stdout.trim();

  it("builds (prepare first), reuses the build image when nothing changed, and tests it; a failing test fails with its exit code", async () => {
    const cold = await capstan(["build", "-f", file]);
    expect(cold.code, cold.stderr).toBe(0);
    expect(cold.stdout).toMatch(new RegExp(`^${app}:build-\\d{14}-[0-9a-f]{12}\\n$`));
    expect(cold.stderr).toContain("build-output-line"); // the script's output is streamed
    expect(cold.stderr).toMatch(new RegExp(`prepare ${app}:prepare-1-\\d{14}`));
    const image = cold.stdout.trim();
    const id = await imageId(image);
    const fileInImage = (await docker(["run", "--rm", "--network", "none", image, "cat", "/platform/app/out/hello.txt"])).stdout;
    expect(fileInImage).toBe("built from v1 with tool-ok\n");

    writeFileSync(join(src, "debug.log"), "not source"); // ignored: still unchanged
    const t0 = Date.now();
    const warm = await capstan(["build", "-f", file]);
    const warmMs = Date.now() - t0;
    expect(warm.code, warm.stderr).toBe(0);
    expect(warm.stdout.trim()).toBe(image);
    expect(warm.stderr).toContain("unchanged, reused");
    expect(warm.stderr).not.toContain("build-output-line"); // nothing ran
    expect(await imageId(image)).toBe(id);
    expect(warmMs).toBeLessThan(15_000);

    const tested = await capstan(["test", "-f", file]);
    expect(tested.code, tested.stderr).toBe(0);

    // A failing test script, from a definition outside the source (so the source is unchanged).
    const failing = join(dir, "failing.yaml");
    writeFileSync(failing, definition(app).replace('grep -q "built from" out/hello.txt', "echo checking; exit 3"));
    const failed = await capstan(["test", "-f", failing, "-C", src]);
    expect(failed.code).toBe(3);
    expect(failed.stdout).toContain("checking");
    expect(failed.stderr).toContain('test.script[0] ("echo checking; exit 3") failed with exit code 3');

    // A failing build line names the line and exits with its code.
    writeFileSync(failing, definition(app).replace("- echo build-output-line", "- exit 7"));
    const badBuild = await capstan(["build", "-f", failing, "-C", src]);
    expect(badBuild.code).toBe(7);
    expect(badBuild.stderr).toContain('build.script[2] ("exit 7") failed with exit code 7');
  }, 180_000);

  it("releases to the registry, lists releases newest first, deploys the newest and rolls back with -release", async () => {
    const r1 = await capstan(["release", "prod", "-f", file, "-registry", registry]);
    expect(r1.code, r1.stderr).toBe(0);
    const first = r1.stdout.trim();
    expect(first).toMatch(new RegExp(`^${registry.replace(/\./g, "\\.")}/${app}:release-\\d{17}-[0-9a-f]{12}$`));
    // The release holds the copied file at its destination, and nothing else of the build (the source, out/).
    expect((await docker(["run", "--rm", "--network", "none", first, "cat", "/srv/www/hello.txt"])).stdout).toBe("built from v1 with tool-ok\n");
    const noSource = await docker(["run", "--rm", "--network", "none", first, "ls", "/platform/app/src.txt", "/platform/app/out"]).then(
      () => "present",
      () => "absent",
    );
    expect(noSource).toBe("absent");

    // A second release of a changed source, possibly in the same second: tags carry milliseconds,
    // so the listing orders the two by time, not by digest.
    writeFileSync(join(src, "src.txt"), "v2\n");
    expect((await capstan(["build", "-f", file])).code).toBe(0);
    const r2 = await capstan(["release", "prod", "-f", file, "-registry", registry]);
    expect(r2.code, r2.stderr).toBe(0);
    const second = r2.stdout.trim();
    const [firstTag, secondTag] = [first.split(":").pop()!, second.split(":").pop()!];

    // The registry has the release, meta and build tag groups (docs/registry-gc.md).
    const tags = await listTags({ registry, repository: app, user: "alice@example.com", accessToken: aliceToken });
    expect(tags).toEqual(expect.arrayContaining([firstTag, secondTag, `meta-${firstTag.slice(8)}`, `meta-${secondTag.slice(8)}`]));
    expect(tags.filter((t) => t.startsWith("build-"))).toHaveLength(2);

    const listed = await capstan(["releases", "prod", app, "-registry", registry, "-o", "json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { tag: string }[]).map((r) => r.tag)).toEqual([secondTag, firstTag]);

    const cat = async () => {
      const r = await capstan(["exec", `${app}.web.web`, "-context", "prod", "--", "cat", "/srv/www/hello.txt"]);
      return r.code === 0 ? r.stdout : undefined;
    };
    const deployed = await capstan(["deploy", "prod", "-f", file, "-registry", registry, "-network", "none", "-wait", "-timeout", "90s"]);
    expect(deployed.code, `${deployed.stdout}\n${deployed.stderr}`).toBe(0);
    const group = JSON.parse((await capstan(["get", "podgroup", `${app}.web.web`, "-context", "prod", "-o", "json"])).stdout) as {
      spec: { pod: { containers: { image: string; env?: string[] }[] } };
    };
    expect(group.spec.pod.containers[0]!.image).toBe(second);
    expect(await pollUntil("the new release running", async () => ((await cat()) === "built from v2 with tool-ok\n" ? true : undefined), 30_000, 500)).toBe(true);
    // It serves the file (busybox httpd on $PORT, asked from inside: networking is off).
    const port = group.spec.pod.containers[0]!.env?.find((e) => e.startsWith("PORT="))?.slice(5);
    const served = await pollUntil(
      "httpd serving the built file",
      async () => {
        const r = await capstan(["exec", `${app}.web.web`, "-context", "prod", "--", "wget", "-qO-", `http://127.0.0.1:${port}/hello.txt`]);
        return r.code === 0 ? r.stdout : undefined;
      },
      30_000,
      500,
    );
    expect(served).toBe("built from v2 with tool-ok\n");

    const back = await capstan(["deploy", "prod", "-f", file, "-registry", registry, "-release", firstTag, "-network", "none", "-wait", "-timeout", "90s"]);
    expect(back.code, `${back.stdout}\n${back.stderr}`).toBe(0);
    expect(await pollUntil("the older release running", async () => ((await cat()) === "built from v1 with tool-ok\n" ? true : undefined), 30_000, 500)).toBe(true);

    const unknown = await capstan(["deploy", "prod", "-f", file, "-registry", registry, "-release", "release-20000101000000-0123456789ab"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no such release");
  }, 240_000);
});
