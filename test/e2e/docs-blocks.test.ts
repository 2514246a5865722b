// The shell blocks of README.md, docs/secrets.md, docs/backup.md and docs/high-availability.md,
// run in bash as written, in page order, each ending with status 0 (or the status the table below
// names), against a real `capstan up` (docs/development.md, "Documentation checks"). The blocks are
// taken from the pages with the static checker's extraction (../unit/docs/command-blocks.ts).
//
// As a reader runs them: from a directory holding `capstan-data` (up's data directory: its
// admin-token and state.db) and `examples` (the repository's), with `capstan` and `npx capstan`
// resolving to this repository's cli/bin/capstan.mjs, and HOME a fresh directory (a private
// ~/.capstan/config.yaml). Each block runs under `set -eo pipefail`, stdin from /dev/null. A block
// after `<!-- docs-check: no-run REASON -->` is not run (it is still checked statically).
// The README's names (`hello`) are used as written: the groups are deleted at the end, pass or fail.
import { spawn, execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capstanBin, runCapstan, startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { startEtcd, type EtcdProcess } from "../helpers/etcd-process.ts";
import { loadServices } from "../helpers/services.ts";
import { commandLines, fencedBlocks, type Block } from "../unit/docs/command-blocks.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const pages = ["README.md", "docs/secrets.md", "docs/backup.md", "docs/high-availability.md"];
const services = loadServices();

const sandbox = mkdtempSync(join(tmpdir(), "capstan-docs-run-"));
const home = join(sandbox, "home");
const data = join(sandbox, "work", "capstan-data");
/** Stands for /etc/capstan, which a test may not write. */
const etcCapstan = join(sandbox, "etc-capstan");
/**
 * The uninitialized secrets service docs/secrets.md's `init` block talks to runs on a private etcd:
 * the block then starts a second secrets process on that store, which an embedded store refuses.
 */
let etcd: EtcdProcess;

/**
 * Every change made to a block's text before it runs, with its reason. Each must match its block
 * (the test fails on one that no longer does). `$DOCS_URL` is up's address, `$DEMO_ETCD` the private etcd.
 */
const rewrites: { file: string; from: string; to: string; reason: string }[] = [
  { file: "README.md", from: "http://127.0.0.1:9000", to: "$DOCS_URL", reason: "up listens on a free port, not 9000" },
  {
    file: "README.md",
    from: "npx capstan logs hello -f ",
    to: "timeout 5 npx capstan logs hello -f || [ $? = 124 ] ",
    reason: "-f follows until Ctrl-C: stopped after 5 s (status 124 of timeout)",
  },
  { file: "docs/secrets.md", from: "/etc/capstan", to: etcCapstan, reason: "/etc is not writable by the test" },
  {
    file: "docs/secrets.md",
    from: "-store ... -cluster ...",
    to: `-store etcd://$DEMO_ETCD -cluster ${services.cluster} -auth none -web 127.0.0.1:0`,
    reason: "the placeholders; on the store initialized by the line before, a free port",
  },
  {
    file: "docs/secrets.md",
    from: "capstan secrets -unseal-key-file",
    to: "timeout 10 capstan secrets -unseal-key-file",
    reason: "a server runs until stopped: still running after 10 s (status 124) means it started",
  },
];

/** Per block (by its first command's start): the environment added and the status expected. */
const blockRuns: { file: string; startsWith: string; status?: number; env?: () => Record<string, string> }[] = [
  // The operator's own init: on a fresh, uninitialized secrets service (up's is initialized).
  { file: "docs/secrets.md", startsWith: "capstan secrets init", status: 124, env: () => ({ CAPSTAN_SECRETS_SECRETS: secretsServer.url }) },
  // The shares printed by that init.
  { file: "docs/secrets.md", startsWith: "(umask 077;", env: () => ({ KEY1: shares[0]!, KEY2: shares[1]!, KEY3: shares[2]! }) },
];

let up: CapstanProcess;
let secretsServer: CapstanProcess;
let shares: string[] = [];
const env: NodeJS.ProcessEnv = {};

function runnable(): Block[] {
  return pages.flatMap((file) => fencedBlocks(file, readFileSync(join(root, file), "utf8")).filter((b) => commandLines(b).length > 0));
}

/** The block's script: the whole body of a sh block, the `$ ` lines of a console block. */
function script(block: Block): string {
  let text = ["sh", "bash", "shell"].includes(block.lang) ? block.body.join("\n") : commandLines(block).map((c) => c.text).join("\n");
  for (const r of rewrites.filter((r) => r.file === block.file)) text = text.replaceAll(r.from, r.to);
  return text;
}

function bash(text: string, more: Record<string, string>, timeoutMs = 120_000): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", `set -eo pipefail\n${text}`], {
      cwd: join(sandbox, "work"),
      env: { ...env, ...more },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe("the documentation's shell blocks, run", () => {
  beforeAll(async () => {
    for (const d of [home, join(sandbox, "bin"), join(sandbox, "work")]) mkdirSync(d, { recursive: true });
    mkdirSync(etcCapstan, { mode: 0o700 });
    mkdirSync(data, { mode: 0o700 });
    symlinkSync(join(root, "examples"), join(sandbox, "work", "examples"));
    // `capstan` and `npx capstan` are this repository's CLI; any other npx call is npm's.
    const npx = execFileSync("bash", ["-c", "command -v npx"], { encoding: "utf8" }).trim();
    writeFileSync(join(sandbox, "bin", "capstan"), `#!/bin/sh\nexec '${capstanBin}' "$@"\n`);
    writeFileSync(join(sandbox, "bin", "npx"), `#!/bin/sh\nif [ "$1" = capstan ]; then shift; exec '${capstanBin}' "$@"; fi\nexec '${npx}' "$@"\n`);
    chmodSync(join(sandbox, "bin", "capstan"), 0o755);
    chmodSync(join(sandbox, "bin", "npx"), 0o755);
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CAPSTAN_")));
    up = await startCapstan("up", ["-data", data, "-cluster", services.cluster, "-registry-web", ""], { HOME: home });
    etcd = await startEtcd();
    secretsServer = await startCapstan("secrets", ["-store", `etcd://${etcd.endpoint}`, "-cluster", services.cluster, "-auth", "none"], { HOME: home });
    Object.assign(env, clean, { HOME: home, PATH: `${join(sandbox, "bin")}:${process.env.PATH}`, DOCS_URL: up.url, DEMO_ETCD: etcd.endpoint });
  }, 90_000);

  afterAll(async () => {
    if (up) {
      const ctx = { ...env, CAPSTAN_SERVER: up.url, CAPSTAN_TOKEN: readFileSync(join(data, "admin-token"), "utf8").trim() };
      for (const group of ["hello", "hello.web.web"]) await runCapstan(["delete", "podgroup", group, "-wait", "-timeout", "60s"], ctx, 90_000);
      await up.stop();
    }
    await secretsServer?.stop();
    await etcd?.stop();
    rmSync(sandbox, { recursive: true, force: true });
  }, 150_000);

  it("every rewrite matches its block", () => {
    const blocks = runnable().filter((b) => b.mark !== "no-run");
    for (const r of rewrites) {
      const text = blocks.filter((b) => b.file === r.file).map((b) => b.body.join("\n")).join("\n");
      expect(text, `rewrite of ${r.file} (${r.reason})`).toContain(r.from);
    }
  });

  for (const block of runnable()) {
    const first = commandLines(block)[0]!.text;
    const name = `${block.file}:${block.line} ${first.slice(0, 50)}`;
    // A no-run block is checked statically only (test/unit/docs): no test here, so the suite counts no skips.
    if (block.mark === "no-run") continue;
    it(name, async () => {
      const special = blockRuns.find((s) => s.file === block.file && first.startsWith(s.startsWith));
      if (block.file === "docs/secrets.md" && first.startsWith("(umask 077;")) {
        expect(shares.length, "the init block printed the shares").toBeGreaterThanOrEqual(3);
        rmSync(join(etcCapstan, "unseal-key"), { force: true });
      }
      const r = await bash(script(block), special?.env?.() ?? {});
      expect(r.code, r.out).toBe(special?.status ?? 0);
      // What each block's comments promise, where the output shows it.
      if (first.startsWith("npx capstan login local")) {
        expect(r.out).toMatch(/user admin .*role admin/);
        expect(r.out, "logs -f printed the instances' output").toContain("hello from");
      }
      if (first.startsWith("npx capstan secrets status")) expect(r.out).toMatch(/"sealed": ?false/);
      if (first.startsWith("capstan secrets init")) {
        shares = [...r.out.matchAll(/^Unseal key \d+: (\S+)$/gm)].map((m) => m[1]!);
        expect(shares, r.out).toHaveLength(5);
        expect(statSync(join(etcCapstan, "unseal-key")).mode & 0o777).toBe(0o600);
        expect(r.out, "the server started on the file unsealed itself").toContain("unsealed from the unseal key file");
      }
      if (first.startsWith("(umask 077;")) {
        expect(statSync(join(etcCapstan, "unseal-key")).mode & 0o777).toBe(0o600);
        expect(readFileSync(join(etcCapstan, "unseal-key"), "utf8")).toBe(`${shares.slice(0, 3).join("\n")}\n`);
      }
    }, 120_000);
  }
});
