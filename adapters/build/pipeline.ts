// Build, test and release of one app on one Docker engine (docs/build.md): the steps of the three
// commands, each a sequence of the engine calls of docker.ts with the decisions of plan.ts.
//
// The build image of a source tree is found again by its cache key (a label), so `test` and
// `release` use the image `build` made for the source as it is now, and a build with nothing
// changed makes nothing new.
import { execFile } from "node:child_process";
import { basename } from "node:path";
import { promisify } from "node:util";
import type Docker from "dockerode";
import {
  BuildError,
  commit,
  copyOut,
  createIdle,
  findImageByLabels,
  importFiles,
  inspectImage,
  pushImage,
  putArchive,
  removeContainer,
  removeImage,
  requireImage,
  runScript,
  tagImage,
  type ImageInfo,
  type PushAuth,
} from "./docker.ts";
import { buildTag, cacheKey, checkTag, contentDigest, copyPaths, gitNamesSource, labels, metaTag, prepareKey, prepareTag, releaseTag } from "./plan.ts";
import { archiveSource } from "./source.ts";

const run = promisify(execFile);

export interface BuildDefinition {
  appname: string;
  build?: { base?: string; script: string[]; prepare?: { version: string; script: string[] } };
  release?: { destBase?: string; copy: { src: string; dest: string }[] };
  test?: { script: string[] };
}

export interface PipelineContext {
  docker: Docker;
  def: BuildDefinition;
  /** The source directory (copied to the app directory). */
  sourceDir: string;
  /** Script output, as it comes, and progress lines. */
  out(text: string, stream: "stdout" | "stderr"): void;
  /** Longest a script (prepare, build, test) may run, ms. */
  scriptTimeoutMs: number;
  now?: () => Date;
  /**
   * The command's interrupt (SIGINT, SIGTERM: interruptSignal): a script's container is removed
   * and the step ends with the reason, a BuildError with the exit code.
   */
  signal?: AbortSignal;
}

/** Stop between steps once interrupted (the reason is a BuildError naming the signal). */
function checkInterrupt(ctx: PipelineContext): void {
  ctx.signal?.throwIfAborted();
}

/**
 * An AbortSignal that SIGINT and SIGTERM abort (reason: a BuildError, exit code 128 + the
 * signal's number), for PipelineContext.signal: the pipeline removes its containers and ends.
 * A second signal ends the process at once (the cleanup itself hung). `dispose` puts the
 * default handling back.
 */
export function interruptSignal(): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const codes = { SIGINT: 130, SIGTERM: 143 } as const;
  const on = (name: keyof typeof codes) => () => {
    if (ac.signal.aborted) process.exit(codes[name]);
    ac.abort(new BuildError(`interrupted by ${name}`, codes[name]));
  };
  const handlers = { SIGINT: on("SIGINT"), SIGTERM: on("SIGTERM") };
  process.on("SIGINT", handlers.SIGINT);
  process.on("SIGTERM", handlers.SIGTERM);
  return {
    signal: ac.signal,
    dispose() {
      process.removeListener("SIGINT", handlers.SIGINT);
      process.removeListener("SIGTERM", handlers.SIGTERM);
    },
  };
}

export interface BuildResult {
  /** `<app>:build-...` */
  image: string;
  tag: string;
  id: string;
  cacheKey: string;
  cached: boolean;
  base: ImageInfo;
}

function buildSection(def: BuildDefinition): { base: string; script: string[]; prepare?: { version: string; script: string[] } } {
  if (!def.build?.base) throw new BuildError("build.base: required to build (the image the build starts from)");
  return { base: def.build.base, script: def.build.script, prepare: def.build.prepare };
}

/** A script's failure as the user should see it: the key, the line, the exit code (the command's). */
function scriptFailure(key: string, lines: readonly string[], r: { exitCode: number; failed?: { line: number; code: number } }): BuildError {
  const n = r.failed?.line;
  const where = n !== undefined ? `${key}[${n - 1}] (${JSON.stringify(lines[n - 1])})` : key;
  return new BuildError(`${where} failed with exit code ${r.exitCode}`, r.exitCode);
}

/** The prepare image (made now when missing), else the base image itself. */
async function startImage(ctx: PipelineContext, make: boolean): Promise<{ image: ImageInfo; ref: string; original: ImageInfo } | undefined> {
  const b = buildSection(ctx.def);
  const base = await requireImage(ctx.docker, b.base, "build.base");
  if (!b.prepare) return { image: base, ref: b.base, original: base };
  const app = ctx.def.appname;
  const key = prepareKey(base.id, b.prepare.version, b.prepare.script);
  const found = await findImageByLabels(ctx.docker, { [labels.app]: app, [labels.kind]: "prepare", [labels.prepareKey]: key });
  if (found) return { image: (await inspectImage(ctx.docker, found.id))!, ref: found.id, original: base };
  if (!make) return undefined;
  const tag = prepareTag(b.prepare.version, (ctx.now ?? (() => new Date()))());
  ctx.out(`capstan: prepare ${app}:${tag} from ${b.base}\n`, "stderr");
  const r = await runScript(ctx.docker, { image: base.id, lines: b.prepare.script, step: "build.prepare.script", labels: { [labels.app]: app }, onOutput: ctx.out, timeoutMs: ctx.scriptTimeoutMs, signal: ctx.signal });
  try {
    if (r.exitCode !== 0) throw scriptFailure("build.prepare.script", b.prepare.script, r);
    checkInterrupt(ctx);
    const id = await commit(ctx.docker, r.containerId, { repo: app, tag, labels: { [labels.app]: app, [labels.kind]: "prepare", [labels.prepareKey]: key }, keep: base });
    return { image: (await inspectImage(ctx.docker, id))!, ref: id, original: base };
  } finally {
    await removeContainer(ctx.docker, r.containerId);
  }
}

/**
 * The source tree's git commit when it is a git work tree with nothing uncommitted and none of the
 * files sent (`sent`) ignored by git (the original's build tag; gitNamesSource says why).
 */
async function gitCommit(dir: string, sent: readonly string[]): Promise<{ committerDate: Date; commit: string } | undefined> {
  try {
    const status = await run("git", ["-C", dir, "status", "--porcelain"], { timeout: 5_000 });
    if (status.stdout.trim() !== "") return undefined;
    const ignored = await run("git", ["-C", dir, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"], { timeout: 5_000, maxBuffer: 64 << 20 });
    if (!gitNamesSource(sent, ignored.stdout.split("\0").filter(Boolean))) return undefined;
    const log = await run("git", ["-C", dir, "log", "-1", "--format=%ct %H"], { timeout: 5_000 });
    const [ct, hash] = log.stdout.trim().split(" ");
    if (!ct || !hash) return undefined;
    return { committerDate: new Date(Number(ct) * 1000), commit: hash };
  } catch {
    return undefined;
  }
}

/**
 * `capstan build`: the build image of the source as it is now; made (prepare first when needed)
 * unless one with the same cache key exists. With make false, only looked up (test, release).
 */
export async function build(ctx: PipelineContext, make = true): Promise<BuildResult | undefined> {
  const b = buildSection(ctx.def);
  const app = ctx.def.appname;
  const start = await startImage(ctx, make);
  if (!start) return undefined;
  const source = await archiveSource(ctx.sourceDir, "platform/app");
  checkInterrupt(ctx);
  const key = cacheKey(start.image.id, b.script, source.digest);
  const found = await findImageByLabels(ctx.docker, { [labels.app]: app, [labels.kind]: "build", [labels.key]: key });
  const newTag = async () => checkTag(buildTag({ git: await gitCommit(ctx.sourceDir, source.sent), now: (ctx.now ?? (() => new Date()))(), cacheKey: key }), "build tag");
  if (found) {
    let tag = found.tags.filter((t) => t.startsWith(`${app}:build-`)).map((t) => t.slice(app.length + 1))[0];
    if (tag === undefined) {
      // The image lost its tag (removed, or taken by a later build of the same commit): it gets
      // one again, never an empty one (`app:` would be pushed as every tag of the repository).
      tag = await newTag();
      ctx.out(`capstan: build image ${found.id.slice(7, 19)} had no build- tag: tagged ${app}:${tag}\n`, "stderr");
      await tagImage(ctx.docker, found.id, app, tag);
    }
    return { image: `${app}:${tag}`, tag, id: found.id, cacheKey: key, cached: true, base: start.original };
  }
  if (!make) return undefined;
  const tag = await newTag();
  ctx.out(`capstan: build ${app}:${tag} from ${b.prepare ? `${start.ref.slice(0, 19)} (prepare of ${b.base})` : b.base}, source ${source.files} files${source.ignoreFile ? ` (less what ${source.ignoreFile} excludes)` : ""}\n`, "stderr");
  const r = await runScript(ctx.docker, { image: start.image.id, lines: b.script, step: "build.script", source: source.tar, labels: { [labels.app]: app }, onOutput: ctx.out, timeoutMs: ctx.scriptTimeoutMs, signal: ctx.signal });
  try {
    if (r.exitCode !== 0) throw scriptFailure("build.script", b.script, r);
    checkInterrupt(ctx);
    const id = await commit(ctx.docker, r.containerId, { repo: app, tag, labels: { [labels.app]: app, [labels.kind]: "build", [labels.key]: key }, keep: start.original });
    return { image: `${app}:${tag}`, tag, id, cacheKey: key, cached: false, base: start.original };
  } finally {
    await removeContainer(ctx.docker, r.containerId);
  }
}

/** The build image of the current source, or a BuildError saying to build first. */
export async function currentBuild(ctx: PipelineContext): Promise<BuildResult> {
  const b = await build(ctx, false);
  if (!b) throw new BuildError(`no build image of ${ctx.def.appname} for the source in ${ctx.sourceDir} as it is now: run capstan build first`);
  return b;
}

/** `capstan test`: test.script in a container of the build image; its exit code when it fails. */
export async function test(ctx: PipelineContext): Promise<{ build: BuildResult; output: string }> {
  const t = ctx.def.test;
  if (!t || t.script.length === 0) throw new BuildError("test.script: the definition has no test script");
  const b = await currentBuild(ctx);
  const r = await runScript(ctx.docker, { image: b.id, lines: t.script, step: "test.script", labels: { [labels.app]: ctx.def.appname }, onOutput: ctx.out, timeoutMs: ctx.scriptTimeoutMs, signal: ctx.signal });
  await removeContainer(ctx.docker, r.containerId);
  if (r.exitCode !== 0) throw scriptFailure("test.script", t.script, r);
  checkInterrupt(ctx);
  return { build: b, output: r.output };
}

export interface ReleaseResult {
  /** `<registry>/<app>` */
  repository: string;
  release: string;
  meta: string;
  build: string;
  pushed: boolean;
}

/**
 * `capstan release`: the release image (release.copy out of the build image into
 * release.dest_base, or the build image itself), the meta image (the definition file) and the
 * build image, tagged in `<registry>/<app>`, then pushed with `auth` (none: tagged only).
 *
 * Steps that do not depend on each other overlap: the meta image is made while the release image
 * is (and tagged once the release's tag is known), the two containers of the copy are made at
 * once and removed while the images are pushed, and the build and meta images are pushed
 * together. The release tag is pushed last, once the others are in: a release the registry lists
 * always has its build and meta images (docs/build.md).
 */
export async function release(
  ctx: PipelineContext,
  o: { registry: string; definitionFile: string; definitionText: string; auth?: PushAuth; pushTimeoutMs: number },
): Promise<ReleaseResult> {
  const app = ctx.def.appname;
  // Every copy path is checked before anything is made.
  const copies = (ctx.def.release?.copy ?? []).map((entry, i) => copyPaths(entry, i));
  const b = await currentBuild(ctx);
  checkInterrupt(ctx);
  const repository = `${o.registry}/${app}`;
  const now = (ctx.now ?? (() => new Date()))();
  const appLabel = { [labels.app]: app };
  // Containers being removed; the release waits for them before it ends, and fails with them.
  const removals: Promise<void>[] = [];
  // Awaited below; handled now, so that its failure while the release image is made is not an
  // unhandled rejection.
  const metaImage = handled(importFiles(ctx.docker, [{ name: basename(o.definitionFile), content: Buffer.from(o.definitionText) }], { ...appLabel, [labels.kind]: "meta" }, `the meta image of ${app}`, ctx.signal));
  let metaTagged = false;
  try {
    let tag: string;
    const rel = ctx.def.release;
    if (rel && rel.copy.length > 0) {
      const destRef = rel.destBase ?? buildSection(ctx.def).base;
      const dest = await requireImage(ctx.docker, destRef, rel.destBase ? "release.dest_base" : "build.base (release.dest_base not given)");
      const [from, to] = await Promise.allSettled([createIdle(ctx.docker, b.id, appLabel), createIdle(ctx.docker, dest.id, appLabel)]);
      try {
        if (from.status === "rejected") throw from.reason;
        if (to.status === "rejected") throw to.reason;
        const raws: Buffer[] = [Buffer.from(dest.id)];
        for (const [i, p] of copies.entries()) {
          checkInterrupt(ctx);
          const { tar, raw } = await copyOut(ctx.docker, from.value, p.src, p.dest, `release.copy[${i}].src`);
          raws.push(Buffer.from(`${p.dest}\n`), raw);
          await putArchive(ctx.docker, to.value, tar);
        }
        tag = releaseTag(now, contentDigest(raws));
        checkInterrupt(ctx);
        await commit(ctx.docker, to.value, { repo: repository, tag, labels: { ...appLabel, [labels.kind]: "release" }, keep: dest });
      } finally {
        for (const c of [from, to]) if (c.status === "fulfilled") removals.push(handled(removeContainer(ctx.docker, c.value)));
      }
    } else {
      tag = releaseTag(now, contentDigest([b.id]));
      await tagImage(ctx.docker, b.id, repository, tag);
    }
    checkInterrupt(ctx);
    const meta = metaTag(tag);
    await allOrFirstError([tagImage(ctx.docker, await metaImage, repository, meta), tagImage(ctx.docker, b.id, repository, b.tag)]);
    metaTagged = true;
    const push = (auth: PushAuth, tags: string[]) => {
      checkInterrupt(ctx);
      for (const t of tags) ctx.out(`capstan: push ${repository}:${t}\n`, "stderr");
      // One push failing stops the others of its group: the command fails with the first.
      const stop = new AbortController();
      const signal = ctx.signal ? AbortSignal.any([ctx.signal, stop.signal]) : stop.signal;
      return allOrFirstError(
        tags.map((t) => pushImage(ctx.docker, repository, t, auth, o.pushTimeoutMs, signal)),
        () => stop.abort(new BuildError("stopped: another push of this release failed")),
      );
    };
    if (o.auth) await push(o.auth, [b.tag, meta]);
    // Before the release is pushed (not on the way: the pushes above take longer), so that a
    // release in the registry is one that succeeded.
    await allOrFirstError(removals);
    if (o.auth) await push(o.auth, [tag]);
    return { repository, release: tag, meta, build: b.tag, pushed: o.auth !== undefined };
  } finally {
    // On a failure: the containers still go, so does a meta image that never got its tag, and the
    // failure is the step's, not a cleanup's. The import is waited for whatever happens: it may
    // finish after the step that failed.
    const madeMeta = await metaImage.catch(() => undefined);
    if (!metaTagged && madeMeta !== undefined) removals.push(removeImage(ctx.docker, madeMeta));
    await Promise.allSettled(removals);
  }
}

/** `work`, with its failure handled now (it is awaited later): not an unhandled rejection meanwhile. */
function handled<T>(work: Promise<T>): Promise<T> {
  work.catch(() => {});
  return work;
}

/**
 * Wait for every one of `work` (none left running), then fail with the one that failed first, if
 * any; `onFailure` is called at that first failure (to stop the others).
 */
async function allOrFirstError(work: Promise<unknown>[], onFailure?: () => void): Promise<void> {
  let first: { error: unknown } | undefined;
  await Promise.all(
    work.map((w) =>
      w.catch((error: unknown) => {
        if (first !== undefined) return;
        first = { error };
        onFailure?.();
      }),
    ),
  );
  if (first !== undefined) throw first.error;
}
