// One registry per filesystem root directory (docs/registry.md, "Running the
// registry"): a lock file at ROOTDIRECTORY/capstan/registry.lock, created atomically, naming its
// holder (pid, host, boot id, pid namespace, start time) and refreshed while held, so a second
// registry refuses to start naming the first, and a dead holder's lock is taken over.
import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, readlinkSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { realClock } from "../../runtime/clock.ts";
import type { Logger } from "../../runtime/log.ts";
import type { Runnable } from "../../runtime/manager.ts";

/** What the lock file holds: who has the root directory. */
export interface LockHolder {
  pid: number;
  host: string;
  /** /proc/sys/kernel/random/boot_id: the same host name after a reboot is not the same machine state. */
  bootId?: string;
  /** /proc/self/ns/pid: pids mean something only inside one pid namespace (container). */
  pidNamespace?: string;
  /** Field 22 of /proc/PID/stat: tells a live holder from a later process that got its pid. */
  startTime?: string;
  command: string;
  since: string;
  /** Random: tells this holder's file from a later one. */
  token: string;
}

/** Another live registry has the root directory. */
export class RootDirectoryInUseError extends Error {
  override readonly name = "RootDirectoryInUseError";
  constructor(
    readonly root: string,
    readonly lockFile: string,
    readonly holder: LockHolder | undefined,
    detail: string,
  ) {
    const who = holder ? `pid ${holder.pid} on host ${holder.host} (${holder.command}, since ${holder.since})` : "an unknown process (the lock file is not readable)";
    super(
      `registry root directory ${root} is in use by ${who}; lock file ${lockFile}${detail ? `; ${detail}` : ""}. ` +
        "Only one registry may serve a filesystem root directory: stop that one first (if it is gone for good, delete the lock file)",
    );
  }
}

/** The lock could not be taken for another reason (a directory that cannot be written). */
export class RootDirectoryLockError extends Error {
  override readonly name = "RootDirectoryLockError";
}

const heldInThisProcess = new Set<string>();

function procBootId(): string | undefined {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

function procPidNamespace(): string | undefined {
  try {
    return readlinkSync("/proc/self/ns/pid");
  } catch {
    return undefined;
  }
}

function procStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * A lock file, ROOT/capstan/registry.lock, that says which process serves ROOT. No flock (Node
 * has none without a native module): the file is created atomically (written aside, then
 * hard-linked into place, so that it never exists half-written) and holds the holder's pid, host,
 * boot id, pid namespace and process start time. A process finding it decides whether the holder
 * lives:
 * - same machine and pid namespace (host, boot id and namespace equal): the pid is alive and
 *   started at the recorded time (a reused pid is not the holder);
 * - otherwise (another machine on a shared filesystem, another container): the holder refreshes
 *   the file's mtime every 5 s; a file not refreshed for 30 s is taken over.
 * A stale lock is taken over (moved aside, then a new one linked in; a mover that finds it moved a
 * fresh lock puts it back). The holder re-reads its lock at every refresh and stops the process
 * if the file names someone else: two takers racing cannot both keep serving. It is removed on a
 * clean stop and at process exit.
 */
export class RootDirectoryLock {
  static readonly refreshMs = 5_000;
  static readonly staleMs = 30_000;

  readonly file: string;
  private released = false;
  private readonly onExit = () => this.release();

  private constructor(
    readonly root: string,
    private readonly record: LockHolder,
    private readonly log: Logger,
  ) {
    this.file = lockFileOf(root);
    process.once("exit", this.onExit);
  }

  static acquire(root: string, o: { command: string; log: Logger }): RootDirectoryLock {
    const file = lockFileOf(root);
    if (heldInThisProcess.has(root)) {
      throw new RootDirectoryInUseError(root, file, readHolder(file), "this process serves it already");
    }
    try {
      mkdirSync(join(root, "capstan"), { recursive: true });
    } catch (e) {
      throw new RootDirectoryLockError(`registry root directory ${root}: cannot create ${join(root, "capstan")} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const bootId = procBootId();
    const pidNamespace = procPidNamespace();
    const startTime = procStartTime(process.pid);
    const record: LockHolder = {
      pid: process.pid,
      host: hostname(),
      ...(bootId ? { bootId } : {}),
      ...(pidNamespace ? { pidNamespace } : {}),
      ...(startTime ? { startTime } : {}),
      command: o.command,
      since: new Date().toISOString(),
      token: randomBytes(12).toString("hex"),
    };
    for (let attempt = 0; attempt < 5; attempt++) {
      if (createLockFile(file, record)) {
        heldInThisProcess.add(root);
        return new RootDirectoryLock(root, record, o.log);
      }
      const holder = readHolder(file);
      let mtimeMs: number;
      try {
        mtimeMs = statSync(file).mtimeMs;
      } catch {
        continue; // gone meanwhile: try again
      }
      const verdict = holderState(holder, mtimeMs);
      if (verdict.alive) throw new RootDirectoryInUseError(root, file, holder, verdict.detail);
      // Stale: move it aside, and check that what was moved is what was judged.
      const aside = `${file}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
      try {
        renameSync(file, aside);
      } catch {
        continue;
      }
      const moved = readHolder(aside);
      if (holder !== undefined && moved?.token !== holder.token) {
        try {
          linkSync(aside, file); // someone's fresh lock: put it back
        } catch {
          // a third process linked its own meanwhile; that one stands
        }
        safeUnlink(aside);
        continue;
      }
      safeUnlink(aside);
      o.log.warn({ lockFile: file, holder, reason: verdict.detail }, "took over a stale registry root directory lock");
    }
    throw new RootDirectoryInUseError(root, file, readHolder(file), "the lock changed hands while this process tried to take it");
  }

  /** Refresh the lock; throws when it is no longer this process's. */
  refresh(): void {
    if (this.released) return;
    const now = readHolder(this.file);
    if (now === undefined) {
      if (createLockFile(this.file, this.record)) {
        this.log.warn({ lockFile: this.file }, "the registry root directory lock file was removed; created it again");
        return;
      }
      throw new Error(`lost the registry root directory lock ${this.file}: it was removed and another process created it`);
    }
    if (now.token !== this.record.token) {
      throw new Error(`lost the registry root directory lock ${this.file}: it now names pid ${now.pid} on host ${now.host} (${now.command})`);
    }
    const t = new Date();
    utimesSync(this.file, t, t);
  }

  /** Remove the lock file if it is still this process's. Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    process.off("exit", this.onExit);
    heldInThisProcess.delete(this.root);
    if (readHolder(this.file)?.token === this.record.token) safeUnlink(this.file);
  }

  /** Refreshes the lock every refreshMs until stopped, then releases it; a lost lock fails the process. */
  runnable(): Runnable {
    return {
      name: "registry-root-lock",
      start: async (signal: AbortSignal) => {
        try {
          while (!signal.aborted) {
            await realClock.sleep(RootDirectoryLock.refreshMs, signal).catch(() => {});
            if (signal.aborted) break;
            this.refresh();
          }
        } finally {
          if (signal.aborted) this.release();
        }
      },
    };
  }
}

function lockFileOf(root: string): string {
  return join(root, "capstan", "registry.lock");
}

/** Write the record aside, then hard-link it into place: false when a lock file exists. */
function createLockFile(file: string, record: LockHolder): boolean {
  const tmp = `${file}.new-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    writeFileSync(tmp, JSON.stringify(record) + "\n", { mode: 0o644 });
  } catch (e) {
    throw new RootDirectoryLockError(`cannot write the registry root directory lock ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    linkSync(tmp, file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code === "EPERM" || code === "ENOTSUP" || code === "EOPNOTSUPP") {
      // A filesystem without hard links: an exclusive create (a reader may see it empty briefly).
      try {
        writeFileSync(file, JSON.stringify(record) + "\n", { flag: "wx", mode: 0o644 });
        return true;
      } catch (e2) {
        if ((e2 as NodeJS.ErrnoException).code === "EEXIST") return false;
        throw e2;
      }
    }
    throw new RootDirectoryLockError(`cannot create the registry root directory lock ${file} (${code ?? (e as Error).message})`);
  } finally {
    safeUnlink(tmp);
  }
}

function readHolder(file: string): LockHolder | undefined {
  try {
    const v = JSON.parse(readFileSync(file, "utf8")) as LockHolder;
    return typeof v.pid === "number" && typeof v.host === "string" && typeof v.token === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

function safeUnlink(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function holderState(holder: LockHolder | undefined, mtimeMs: number): { alive: boolean; detail: string } {
  const age = Date.now() - mtimeMs;
  const fresh = (what: string) =>
    age <= RootDirectoryLock.staleMs
      ? { alive: true, detail: `${what}: its lock was refreshed ${Math.max(0, Math.round(age / 1000))} s ago (taken over once not refreshed for ${RootDirectoryLock.staleMs / 1000} s)` }
      : { alive: false, detail: `${what}, not refreshed for ${Math.round(age / 1000)} s` };
  if (holder === undefined) return fresh("unreadable lock file");
  const bootId = procBootId();
  const pidNamespace = procPidNamespace();
  const sameMachine =
    holder.host === hostname() &&
    (holder.bootId !== undefined && bootId !== undefined ? holder.bootId === bootId : holder.bootId === bootId) &&
    (holder.pidNamespace !== undefined && pidNamespace !== undefined ? holder.pidNamespace === pidNamespace : holder.pidNamespace === pidNamespace);
  if (!sameMachine) return fresh("held from another machine or container");
  if (holder.pid === process.pid) return { alive: false, detail: "left by an earlier process with this pid" };
  try {
    process.kill(holder.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return { alive: false, detail: `pid ${holder.pid} is not running` };
  }
  const started = procStartTime(holder.pid);
  if (holder.startTime !== undefined && started !== undefined && started !== holder.startTime) {
    return { alive: false, detail: `pid ${holder.pid} is another process now` };
  }
  return { alive: true, detail: "" };
}
