// The build pipeline against the real engine n1 (docs/build.md): a script's container never
// outlives its step (timeout, interrupt, SIGINT to the command, failure); release.copy of `.`
// copies the app directory; a cache hit on a build image that lost its tag tags it again.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { extract } from "tar-stream";
import { afterAll, describe, expect, it } from "vitest";
import { BuildError, connectEngine, runScript } from "../../../adapters/build/docker.ts";
import { build, release, type BuildDefinition, type PipelineContext } from "../../../adapters/build/pipeline.ts";
import { labels } from "../../../adapters/build/plan.ts";
import { capstanBin } from "../../helpers/capstan-process.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";

const services = loadServices();
const engine = services.engines.n1!;
const docker = connectEngine(engine);
const app = uniqueName("bldfix");
const dir = mkdtempSync(join(tmpdir(), "capstan-build-int-"));
const src = join(dir, "src");
mkdirSync(src);
writeFileSync(join(src, "src.txt"), "v1\n");

const appLabel = { [labels.app]: app };
const containersLeft = async () => (await docker.listContainers({ all: true, filters: { label: [`${labels.app}=${app}`] } })).map((c) => c.Id);

function ctx(def: Partial<BuildDefinition>, more: Partial<PipelineContext> = {}): PipelineContext {
  return { docker, def: { appname: app, build: { base: services.testImage, script: ["echo built > out.txt"] }, ...def }, sourceDir: src, out: () => {}, scriptTimeoutMs: 60_000, ...more };
}

/** The files of `path` in an image, by name, with their text. */
async function filesIn(image: string, path: string): Promise<Record<string, string>> {
  const c = await docker.createContainer({ Image: image, Cmd: ["sh"], Labels: appLabel });
  try {
    const s = (await c.getArchive({ path })) as unknown as Readable;
    const out: Record<string, string> = {};
    const ex = extract();
    const done = new Promise<void>((resolve, reject) => {
      ex.on("entry", (h, stream, next) => {
        const chunks: Buffer[] = [];
        stream.on("data", (b: unknown) => chunks.push(b as Buffer));
        stream.on("end", () => {
          if (h.type === "file") out[h.name] = Buffer.concat(chunks).toString();
          next();
        });
      });
      ex.on("finish", resolve);
      ex.on("error", reject);
    });
    s.pipe(ex);
    await done;
    return out;
  } finally {
    await c.remove({ force: true });
  }
}

afterAll(async () => {
  for (const id of await containersLeft()) await docker.getContainer(id).remove({ force: true }).catch(() => {});
  for (let pass = 0; pass < 2; pass++) {
    const images = await docker.listImages({ filters: { label: [`${labels.app}=${app}`] } });
    for (const i of images) await docker.getImage(i.Id).remove({ force: true }).catch(() => {});
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("a script's container", () => {
  it("is removed when the script times out, and the error names the step and the timeout", async () => {
    const started = Date.now();
    const e = await runScript(docker, { image: services.testImage, lines: ["sleep 60"], step: "build.script", labels: appLabel, onOutput: () => {}, timeoutMs: 1_500 }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(BuildError);
    expect((e as Error).message).toBe("build.script timed out after 1500ms (-script-timeout); its container was removed");
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await containersLeft()).toEqual([]);
  });

  it("is removed when the command is interrupted; the error carries the signal's exit code", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(new BuildError("interrupted by SIGTERM", 143)), 1_500);
    const e = await runScript(docker, { image: services.testImage, lines: ["sleep 60"], step: "test.script", labels: appLabel, onOutput: () => {}, timeoutMs: 60_000, signal: ac.signal }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(BuildError);
    expect((e as BuildError).message).toBe("test.script: interrupted by SIGTERM; its container was removed");
    expect((e as BuildError).code).toBe(143);
    expect(await containersLeft()).toEqual([]);
  });

  it("is removed when the build fails, and by `capstan build` on SIGINT (exit 130)", async () => {
    const failed = await build(ctx({ build: { base: services.testImage, script: ["exit 7"] } })).catch((err: unknown) => err);
    expect((failed as BuildError).code).toBe(7);
    expect(await containersLeft()).toEqual([]);

    const file = join(dir, "sleepy.yaml");
    writeFileSync(file, `appname: ${app}\nbuild:\n  base: ${services.testImage}\n  script:\n    - echo started; sleep 60\n`);
    const child = spawn(capstanBin, ["build", "-f", file, "-C", src], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DOCKER_HOST: engine } });
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no script output: ${stderr}`)), 30_000);
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes("started")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(await containersLeft()).toHaveLength(1);
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    expect(stderr).toContain("capstan build: build.script: interrupted by SIGINT; its container was removed");
    expect(await containersLeft()).toEqual([]);
  }, 60_000);
});

describe("release.copy and tags", () => {
  it("copies the whole app directory for src `.`, and refuses `..` before making anything", async () => {
    const c = ctx({ release: { destBase: services.testImage, copy: [{ src: ".", dest: "/srv/app" }] } });
    await build(c);
    const r = await release(c, { registry: "127.0.0.1:1", definitionFile: "app.yaml", definitionText: "x", pushTimeoutMs: 10_000 });
    expect(await filesIn(`${r.repository}:${r.release}`, "/srv/app")).toEqual({ "app/out.txt": "built\n", "app/src.txt": "v1\n" });

    const bad = await release(ctx({ release: { copy: [{ src: "..", dest: "/srv" }] } }), { registry: "127.0.0.1:1", definitionFile: "app.yaml", definitionText: "x", pushTimeoutMs: 10_000 }).catch((err: unknown) => err);
    expect((bad as Error).message).toMatch(/^release\.copy\[0\]\.src: "\.\." is outside \/platform\/app/);
  });

  it("leaves no container and no meta image behind when a release fails (a release.copy source that is not there)", async () => {
    const c = ctx({ build: { base: services.testImage, script: ["echo gone > g.txt"] }, release: { copy: [{ src: "nothere.txt", dest: "/x" }] } });
    await build(c);
    const metaImages = async () => (await docker.listImages({ filters: { label: [`${labels.app}=${app}`, `${labels.kind}=meta`] } })).map((i) => i.Id);
    const before = await metaImages();
    const failed = await release(c, { registry: "127.0.0.1:1", definitionFile: "app.yaml", definitionText: "x", pushTimeoutMs: 10_000 }).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(BuildError);
    expect((failed as Error).message).toBe("release.copy[0].src: /platform/app/nothere.txt does not exist in the build image");
    expect(await containersLeft()).toEqual([]);
    expect(await metaImages()).toEqual(before); // the meta image made meanwhile is gone again
  });

  it("fails a release whose container removal fails, with that error (never an unhandled rejection while it tags and pushes)", async () => {
    const c = ctx({ build: { base: services.testImage, script: ["echo rm > r.txt"] }, release: { copy: [{ src: "r.txt", dest: "/r.txt" }] } });
    await build(c);
    // The engine removes the container, then answers 500; tagging is slow, so the removal's
    // failure comes while the release goes on.
    const failingRemove = new Proxy(docker, {
      get(target, prop, receiver) {
        if (prop === "getContainer") {
          return (id: string) => {
            const container = target.getContainer(id);
            return new Proxy(container, {
              get: (t, p) =>
                p === "remove"
                  ? async (o: object) => {
                      await t.remove(o);
                      throw Object.assign(new Error("removal failed (the engine said 500)"), { statusCode: 500 });
                    }
                  : (Reflect.get(t, p) as unknown),
            });
          };
        }
        if (prop === "getImage") {
          return (name: string) => {
            const image = target.getImage(name);
            return new Proxy(image, {
              get: (t, p) => (p === "tag" ? async (o: object) => (await new Promise((r) => setTimeout(r, 300)), t.tag(o as never)) : (Reflect.get(t, p) as unknown)),
            });
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const failed = await release({ ...c, docker: failingRemove }, { registry: "127.0.0.1:1", definitionFile: "app.yaml", definitionText: "x", pushTimeoutMs: 10_000 }).catch((err: unknown) => err);
    expect((failed as Error).message).toBe("removal failed (the engine said 500)");
    expect(await containersLeft()).toEqual([]);
  });

  it("tags a cached build image that lost its tag again, never with an empty tag", async () => {
    const c = ctx({ build: { base: services.testImage, script: ["echo untagged > u.txt"] } });
    const first = (await build(c))!;
    // Another name keeps the image when its build tag goes (as when a later build takes the tag).
    await docker.getImage(first.id).tag({ repo: `${app}-keep`, tag: "x" });
    await docker.getImage(`${app}:${first.tag}`).remove();
    const again = (await build(c))!;
    expect(again.cached).toBe(true);
    expect(again.id).toBe(first.id);
    expect(again.tag).toMatch(/^build-\d{14}-[0-9a-f]{12}$/);
    expect((await docker.getImage(again.image).inspect()).Id).toBe(first.id);
    await docker.getImage(`${app}-keep:x`).remove();
  });
});
