// The Docker Engine API calls of `capstan build`, `test` and `release` (docs/build.md), with
// dockerode only: containers are created, given files (putArchive), started, waited for and
// committed; files are taken out with getArchive; images are tagged and pushed. No Dockerfile, no
// BuildKit, nothing pulled: every image named must already be on the engine.
//
// Every call has a timeout; a script's container has its own (the script may run long).
import { randomBytes } from "node:crypto";
import { Readable, type Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type Docker from "dockerode";
import { dockerClient } from "../cluster/docker-client.ts";
import { extract, pack } from "tar-stream";
import { packedBytes } from "../cluster/archive.ts";
import { formatDuration } from "../../runtime/duration.ts";
import { appDir, BuildError, checkTag, failedLine, markerHoldFrom, renameEntry, scriptWrapper, withoutMarker } from "./plan.ts";

export { BuildError };

/** A short call (inspect, create, commit, tag, archive), ms. */
const callTimeoutMs = 60_000;

/** The engine: `host` (-docker), else DOCKER_HOST, else the local socket. unix:///path, tcp://h:p, http://h:p. */
export function connectEngine(host?: string): Docker {
  const h = host ?? process.env.DOCKER_HOST;
  if (!h) return dockerClient({ socketPath: "/var/run/docker.sock" });
  if (h.startsWith("unix://")) return dockerClient({ socketPath: h.slice("unix://".length) });
  const m = /^(tcp|http|https):\/\/([^:/]+|\[[^\]]+\]):(\d+)\/?$/.exec(h);
  if (!m) throw new BuildError(`engine address "${h}" must be unix:///PATH or tcp://HOST:PORT`);
  if (m[1] === "https") throw new BuildError(`engine address "${h}": https needs TLS client material, which capstan build does not take; use unix:///PATH or tcp://HOST:PORT`);
  return dockerClient({ host: m[2]!.replace(/^\[|\]$/g, ""), port: Number(m[3]), protocol: "http" });
}

const signal = (ms = callTimeoutMs) => AbortSignal.timeout(ms);
const statusOf = (e: unknown) => (e as { statusCode?: number }).statusCode;

export interface ImageInfo {
  id: string;
  entrypoint: string[] | null;
  cmd: string[] | null;
  labels: Record<string, string>;
}

/** The image's ID and start command, or undefined when the engine does not have it. */
export async function inspectImage(docker: Docker, ref: string): Promise<ImageInfo | undefined> {
  try {
    const i = await docker.getImage(ref).inspect({ abortSignal: signal() } as object);
    return { id: i.Id, entrypoint: (i.Config?.Entrypoint as string[] | null) ?? null, cmd: i.Config?.Cmd ?? null, labels: i.Config?.Labels ?? {} };
  } catch (e) {
    if (statusOf(e) === 404) return undefined;
    throw e;
  }
}

/** An image the engine must have: else a BuildError naming the key of the definition and the image. */
export async function requireImage(docker: Docker, ref: string, key: string): Promise<ImageInfo> {
  const info = await inspectImage(docker, ref);
  if (!info) throw new BuildError(`${key}: image ${ref} is not on the engine (nothing is pulled by a build: docker pull ${ref} first)`);
  return info;
}

/** The newest image with all these labels (key=value), or undefined: the cache lookup. */
export async function findImageByLabels(docker: Docker, labels: Record<string, string>): Promise<{ id: string; tags: string[] } | undefined> {
  const list = await docker.listImages({ filters: { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) }, abortSignal: signal() } as object);
  const newest = list.sort((a, b) => b.Created - a.Created)[0];
  return newest ? { id: newest.Id, tags: (newest.RepoTags ?? []).filter((t) => t !== "<none>:<none>") } : undefined;
}

export interface ScriptRun {
  containerId: string;
  exitCode: number;
  /** The failing line (1-based) when the script stopped at one. */
  failed?: { line: number; code: number };
  /** Everything the script printed (both streams), marker removed. */
  output: string;
}

/**
 * A stream's bytes as text: a UTF-8 character split between two chunks is decoded whole (not as two
 * U+FFFD); `flush` gives what is left at the end. Written to by demuxStream.
 */
export function textSink(onText: (text: string) => void): { write(chunk: Buffer): boolean; flush(): void } {
  const d = new StringDecoder("utf8");
  return {
    write(chunk) {
      const t = d.write(chunk);
      if (t) onText(t);
      return true;
    },
    flush() {
      const t = d.end();
      if (t) onText(t);
    },
  };
}

/** Remove a container, or say in a sentence why it could not be (for an error message that has a cause already). */
async function removeNoting(docker: Docker, id: string): Promise<string> {
  try {
    await removeContainer(docker, id);
    return "";
  } catch (e) {
    return `; its container ${id.slice(0, 12)} could not be removed (${(e as Error).message}): docker rm -f ${id.slice(0, 12)}`;
  }
}

/**
 * Run `lines` in a new container of `image`, each as `sh -c LINE` in the app directory, stopping
 * at the first failing line; `source` (a tar for "/") is put in before the start. Output is passed
 * on as it comes. On success or a failing line the container is left (stopped) for a commit and
 * the caller removes it (in a finally); on anything else (the timeout, `signal`, an engine error)
 * it is removed here, force, before the error is thrown: no script container outlives its step.
 *
 * `step` names the script in errors (`build.script timed out after 30m`); `signal` is the command's
 * interrupt (SIGINT, SIGTERM), its reason a BuildError with the exit code.
 */
export async function runScript(
  docker: Docker,
  o: {
    image: string;
    lines: readonly string[];
    step: string;
    source?: Buffer | readonly Buffer[];
    labels?: Record<string, string>;
    onOutput(chunk: string, stream: "stdout" | "stderr"): void;
    timeoutMs: number;
    signal?: AbortSignal;
  },
): Promise<ScriptRun> {
  o.signal?.throwIfAborted();
  // The image's own entrypoint would run the script as its argument: replaced by `sh -c` only when
  // it has one (commit puts it back); without one the command alone is `sh -c SCRIPT`.
  const image = await inspectImage(docker, o.image);
  const hasEntrypoint = (image?.entrypoint ?? []).length > 0;
  // Named, so that a create the engine did though our call failed (its timeout) is found and removed.
  const name = `capstan-script-${randomBytes(8).toString("hex")}`;
  let container: Docker.Container;
  try {
    container = await docker.createContainer({
      name,
      Image: o.image,
      WorkingDir: appDir,
      ...(hasEntrypoint ? { Entrypoint: ["sh", "-c"], Cmd: [scriptWrapper(o.lines)] } : { Cmd: ["sh", "-c", scriptWrapper(o.lines)] }),
      Labels: o.labels ?? {},
      AttachStdout: true,
      AttachStderr: true,
      abortSignal: signal(),
    } as Docker.ContainerCreateOptions);
  } catch (e) {
    await removeNoting(docker, name);
    throw e;
  }
  // One controller ends every call of the run: the script's timeout or the command's interrupt.
  const stop = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort();
  }, o.timeoutMs);
  const interrupt = () => stop.abort();
  o.signal?.addEventListener("abort", interrupt, { once: true });
  const both = (ms = callTimeoutMs) => AbortSignal.any([signal(ms), stop.signal]);
  try {
    if (o.signal?.aborted) stop.abort();
    if (o.source) {
      const body = Buffer.isBuffer(o.source) ? o.source : Readable.from(o.source);
      await container.putArchive(body as Buffer, { path: "/", abortSignal: both() } as object);
    }
    const stream = (await container.attach({ stream: true, stdout: true, stderr: true, abortSignal: stop.signal } as object)) as unknown as Readable;
    let output = "";
    let stderr = "";
    let held = "";
    const out = textSink((text) => {
      output += text;
      o.onOutput(text, "stdout");
    });
    const showErr = (text: string) => {
      const shown = withoutMarker(text);
      output += shown;
      if (shown) o.onOutput(shown, "stderr");
    };
    const err = textSink((text) => {
      stderr += text;
      // A marker split across chunks is held back whole (markerHoldFrom), then taken out.
      held += text;
      const cut = markerHoldFrom(held);
      showErr(held.slice(0, cut));
      held = held.slice(cut);
    });
    docker.modem.demuxStream(stream, out as unknown as Writable, err as unknown as Writable);
    const ended = new Promise<void>((resolve) => {
      stream.on("end", resolve);
      stream.on("close", resolve);
      stream.on("error", () => resolve());
    });
    await container.start({ abortSignal: both() } as object);
    const waited = (await container.wait({ abortSignal: stop.signal } as object)) as { StatusCode: number };
    // The last output may trail the exit a little; an attach that never ends does not hold us up.
    let graceTimer: NodeJS.Timeout | undefined;
    await Promise.race([ended, new Promise((r) => (graceTimer = setTimeout(r, 5_000)))]);
    clearTimeout(graceTimer);
    out.flush();
    err.flush();
    showErr(held);
    return { containerId: container.id, exitCode: waited.StatusCode, failed: failedLine(stderr), output };
  } catch (e) {
    const note = await removeNoting(docker, container.id);
    if (timedOut) throw new BuildError(`${o.step} timed out after ${formatDuration(o.timeoutMs)} (-script-timeout)${note || "; its container was removed"}`);
    const reason: unknown = o.signal?.aborted ? o.signal.reason : undefined;
    if (reason instanceof BuildError) throw new BuildError(`${o.step}: ${reason.message}${note || "; its container was removed"}`, reason.code);
    if (note && e instanceof Error) e.message += note;
    throw e;
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener("abort", interrupt);
  }
}

/** Commit a container as repo:tag with labels; the image keeps `keep`'s start command (not the script's). */
export async function commit(docker: Docker, containerId: string, o: { repo: string; tag: string; labels: Record<string, string>; keep: ImageInfo }): Promise<string> {
  const changes = [
    ...((o.keep.entrypoint ?? []).length > 0 ? [`ENTRYPOINT ${JSON.stringify(o.keep.entrypoint)}`] : []),
    `CMD ${JSON.stringify(o.keep.cmd ?? [])}`,
    ...Object.entries(o.labels).map(([k, v]) => `LABEL ${k}=${JSON.stringify(v)}`),
  ];
  checkTag(o.tag, `commit of ${o.repo}`);
  const r = (await docker.getContainer(containerId).commit({ repo: o.repo, tag: o.tag, changes, pause: false, abortSignal: signal() } as object)) as { Id: string };
  return r.Id;
}

/** Remove a container (a build's, a test's), ignoring one already gone. */
export async function removeContainer(docker: Docker, id: string): Promise<void> {
  try {
    await docker.getContainer(id).remove({ force: true, v: true, abortSignal: signal() } as object);
  } catch (e) {
    if (statusOf(e) !== 404) throw e;
  }
}

/** Tag an image (`repo:tag`). */
export async function tagImage(docker: Docker, image: string, repo: string, tag: string): Promise<void> {
  checkTag(tag, `tag of ${repo}`);
  await docker.getImage(image).tag({ repo, tag, abortSignal: signal() } as Docker.ImageTagOptions);
}

/** A container of `image` that never runs: for getArchive and putArchive. */
export async function createIdle(docker: Docker, image: string, labels: Record<string, string>): Promise<string> {
  // The image's own command is kept (the container is committed as the release); an image with no
  // command at all gets one only so that the engine creates the container.
  const info = await inspectImage(docker, image);
  const none = (info?.entrypoint ?? []).length === 0 && (info?.cmd ?? []).length === 0;
  const c = await docker.createContainer({ Image: image, ...(none ? { Cmd: ["sh"] } : {}), Labels: labels, abortSignal: signal() } as Docker.ContainerCreateOptions);
  return c.id;
}

/**
 * The file or directory `src` of a container as a tar for "/" with its paths moved to `dest`; the
 * raw archive too (for the content digest). A missing `src` is a BuildError naming it.
 */
export async function copyOut(docker: Docker, containerId: string, src: string, dest: string, what: string): Promise<{ tar: Buffer; raw: Buffer }> {
  let raw: Buffer;
  try {
    const s = (await docker.getContainer(containerId).getArchive({ path: src, abortSignal: signal() } as object)) as unknown as Readable;
    const chunks: Buffer[] = [];
    for await (const c of s) chunks.push(c as Buffer);
    raw = Buffer.concat(chunks);
  } catch (e) {
    if (statusOf(e) === 404) throw new BuildError(`${what}: ${src} does not exist in the build image`);
    throw e;
  }
  const base = src.split("/").filter(Boolean).pop() ?? "";
  const ex = extract();
  const p = pack();
  const packed = packedBytes(p);
  let copied = 0;
  const extracted = new Promise<void>((resolve, reject) => {
    ex.on("entry", (header, stream, next) => {
      const name = renameEntry(header.name, base, dest);
      if (name !== undefined) copied++;
      if (name === undefined) {
        stream.resume();
        stream.on("end", next);
        return;
      }
      const entry = p.entry({ ...header, name }, (err) => (err ? reject(err) : next()));
      stream.pipe(entry);
    });
    ex.on("finish", resolve);
    ex.on("error", reject);
  });
  ex.end(raw);
  await extracted;
  p.finalize();
  // A copy that succeeds with nothing in it is a release without its files: refused.
  if (copied === 0) throw new BuildError(`${what}: ${src} matched nothing in the build image`);
  return { tar: await packed, raw };
}

/** Put a tar (names relative to "/") into a container. */
export async function putArchive(docker: Docker, containerId: string, tar: Buffer): Promise<void> {
  await docker.getContainer(containerId).putArchive(tar, { path: "/", abortSignal: signal() } as object);
}

/**
 * An image holding only `files` (no base: the original's meta image carried the definition file
 * alone), imported from a tar by the engine (POST /images/create?fromSrc=-): nothing is
 * downloaded. Untagged (tag it with tagImage); its ID is the answer.
 */
export async function importFiles(docker: Docker, files: { name: string; content: Buffer }[], labels: Record<string, string>, what: string, interrupt?: AbortSignal): Promise<string> {
  const p = pack();
  const done = packedBytes(p);
  for (const f of files) p.entry({ name: f.name, mode: 0o644, mtime: new Date(0), size: f.content.length }, f.content);
  p.finalize();
  const tar = await done;
  const changes = Object.entries(labels).map(([k, v]) => `LABEL ${k}=${JSON.stringify(v)}`);
  const stream = (await docker.importImage(tar as unknown as NodeJS.ReadableStream, { changes, abortSignal: interrupt ? AbortSignal.any([signal(), interrupt]) : signal() } as object)) as unknown as Readable;
  const events = await followStream(docker, stream, `import of ${what}`);
  // The engine's last word on an import is the new image's ID.
  const id = events.map((e) => e.status).findLast((status) => typeof status === "string" && /^sha256:[0-9a-f]{64}$/.test(status));
  if (id === undefined) throw new BuildError(`import of ${what}: the engine did not say which image it made`);
  return id;
}

/** Remove an image by ID (one a failed release made and left untagged), ignoring one already gone. */
export async function removeImage(docker: Docker, id: string): Promise<void> {
  try {
    await docker.getImage(id).remove({ abortSignal: signal() } as object);
  } catch (e) {
    if (statusOf(e) !== 404) throw e;
  }
}

/** The registry credentials of a push, sent as X-Registry-Auth (docs/registry.md, "Credentials"). */
export interface PushAuth {
  username: string;
  password: string;
  serveraddress: string;
}

/**
 * Push repo:tag with `auth`; a failure (denied, unreachable) is a BuildError with the engine's
 * message, the timeout one saying so. `interrupt`: the command's (its reason is the error).
 */
export async function pushImage(docker: Docker, repo: string, tag: string, auth: PushAuth, timeoutMs: number, interrupt?: AbortSignal): Promise<void> {
  // An empty tag would push every tag of the repository.
  checkTag(tag, `push of ${repo}`);
  const timeout = signal(timeoutMs);
  try {
    const stream = (await docker.getImage(repo).push({ tag, authconfig: auth, abortSignal: interrupt ? AbortSignal.any([timeout, interrupt]) : timeout } as object)) as unknown as Readable;
    await followStream(docker, stream, `push of ${repo}:${tag}`);
  } catch (e) {
    if (interrupt?.aborted && interrupt.reason instanceof BuildError) throw new BuildError(`push of ${repo}:${tag}: ${interrupt.reason.message}`, interrupt.reason.code);
    if (timeout.aborted) throw new BuildError(`push of ${repo}:${tag} timed out after ${formatDuration(timeoutMs)} (-push-timeout)`);
    throw e;
  }
}

/** One event of the engine's progress stream (pull, push, import). */
interface ProgressEvent {
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
}

async function followStream(docker: Docker, stream: Readable, what: string): Promise<ProgressEvent[]> {
  return await new Promise<ProgressEvent[]>((resolve, reject) => {
    docker.modem.followProgress(stream, (err: Error | null, events: ProgressEvent[]) => {
      if (err) return reject(new BuildError(`${what}: ${err.message}`));
      const bad = events.find((e) => e.error || e.errorDetail);
      if (bad) return reject(new BuildError(`${what}: ${bad.errorDetail?.message ?? bad.error}`));
      resolve(events);
    });
  });
}
