// The `capstan` command runs from a cached esbuild bundle of its sources (docs/cli.md): made on
// the first start, reused while no source changed, made again when one did, and never in the way:
// CAPSTAN_CLI_BUNDLE=0 or a cache that cannot be written runs the sources through tsx. Checked on
// a tiny project of its own (cli/bin/load-main.mjs copied, a cli/main.ts that prints a word, a
// CommonJS package of its own in node_modules), with the real esbuild and tsx; and on this
// repository's own command, whose start must not load what the stubs replace.
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = join(import.meta.dirname, "../../..");

describe("the capstan command's bundle", () => {
  let project: string;
  const cache = () => {
    const dir = join(project, "node_modules/.cache/capstan-cli");
    const [only, ...more] = readdirSync(dir);
    expect(more).toEqual([]); // one checkout, one directory
    return join(dir, only!);
  };
  const current = () => JSON.parse(readFileSync(join(cache(), "current.json"), "utf8")) as { dir: string; inputs: [string, number, number][] };
  const capstan = (env: Record<string, string> = {}) =>
    run(process.execPath, [join(project, "cli/bin/capstan.mjs"), "hello"], { env: { ...process.env, ...env }, timeout: 60_000 });
  const writeSource = (path: string, text: string) => {
    const file = join(project, path);
    writeFileSync(file, text);
    // Older than the next build's start, as a file saved before it would be (one saved during a
    // build is not recorded, so that the next start builds again).
    const past = new Date(Date.now() - 5_000);
    utimesSync(file, past, past);
  };
  const writeMain = (word: string) => {
    writeSource("cli/main.ts", `import { greet } from "./greet.ts";\nexport async function main(argv: string[]): Promise<number> {\n  console.log(greet("${word}", argv[0] ?? ""));\n  return 0;\n}\n`);
  };

  beforeAll(() => {
    project = mkdtempSync(join(tmpdir(), "capstan-bundle-"));
    mkdirSync(join(project, "cli/bin"), { recursive: true });
    mkdirSync(join(project, "node_modules"));
    for (const name of ["esbuild", "tsx"]) symlinkSync(join(repo, "node_modules", name), join(project, "node_modules", name));
    cpSync(join(repo, "cli/bin/capstan.mjs"), join(project, "cli/bin/capstan.mjs"));
    cpSync(join(repo, "cli/bin/load-main.mjs"), join(project, "cli/bin/load-main.mjs"));
    writeSource("package.json", JSON.stringify({ name: "capstan", type: "module" }));
    writeSource("tsconfig.json", JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true, noEmit: true } }));
    // A CommonJS package that requires one of Node's modules: bundled, it needs the bundle's require().
    mkdirSync(join(project, "node_modules/shout"));
    writeSource("node_modules/shout/package.json", JSON.stringify({ name: "shout", version: "1.0.0", main: "index.js" }));
    writeSource("node_modules/shout/index.js", `const { EOL } = require("node:os");\nmodule.exports = (s) => (EOL === "\\n" ? s.toUpperCase() : s);\n`);
    writeSource("cli/greet.ts", `import shout from "shout";\nexport const greet = (word: string, who: string): string => \`\${word} \${shout(who)}\`;\n`);
    writeMain("hi");
  });

  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it("is made on the first start and records every source it was made from", async () => {
    const { stdout, stderr } = await capstan();
    expect(stdout).toBe("hi HELLO\n");
    expect(stderr).toBe("");
    const inputs = current().inputs.map(([path]) => path).sort();
    // The package by its package.json, not by each of its files; load-main.mjs itself, as it decides how the bundle is made.
    expect(inputs).toEqual(["cli/bin/load-main.mjs", "cli/greet.ts", "cli/main.ts", "node_modules/shout/package.json", "package.json", "tsconfig.json"]);
    const chunks = readdirSync(join(cache(), current().dir)).map((f) => readFileSync(join(cache(), current().dir, f), "utf8")).join("\n");
    expect(chunks).toContain("toUpperCase"); // bundled, not imported from node_modules
  }, 60_000);

  it("is made again when a bundled package's package.json changed (an upgrade)", async () => {
    const first = current().dir;
    writeSource("node_modules/shout/package.json", JSON.stringify({ name: "shout", version: "1.0.1", main: "index.js" }));
    expect((await capstan()).stdout).toBe("hi HELLO\n");
    expect(current().dir).not.toBe(first);
  }, 60_000);

  it("is reused while nothing changed, and made again when a source did", async () => {
    const first = current().dir;
    expect((await capstan()).stdout).toBe("hi HELLO\n");
    expect(current().dir).toBe(first);
    writeMain("bye");
    expect((await capstan()).stdout).toBe("bye HELLO\n");
    expect(current().dir).not.toBe(first);
  }, 60_000);

  it("is made again when its directory is gone, and tells the bundled code which checkout it is", async () => {
    rmSync(join(cache(), current().dir), { recursive: true });
    expect(await capstan()).toEqual({ stdout: "bye HELLO\n", stderr: "" });
    writeSource("cli/main.ts", `export async function main(): Promise<number> {\n  console.log((globalThis as Record<symbol, unknown>)[Symbol.for("capstan.packageRoot")]);\n  return 0;\n}\n`);
    expect((await capstan()).stdout).toBe(`${project}/\n`);
  }, 60_000);

  it("runs the code once when the code itself throws (no second run through tsx)", async () => {
    writeSource("cli/main.ts", `console.log("loaded");\nthrow new Error("boom");\nexport async function main(): Promise<number> {\n  return 0;\n}\n`);
    const failed = await capstan().then(
      () => undefined,
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(failed?.stdout).toBe("loaded\n");
    expect(failed?.stderr).toMatch(/Error: boom/);
    expect(failed?.stderr).not.toMatch(/running from the sources/);
  }, 60_000);

  it("is not made when a package it would hold uses __dirname (its files would be looked for next to the bundle): the sources run, and the line names the file", async () => {
    mkdirSync(join(project, "node_modules/where"));
    writeSource("node_modules/where/package.json", JSON.stringify({ name: "where", version: "1.0.0", main: "index.js" }));
    writeSource("node_modules/where/index.js", `// __dirname in a comment is fine\nmodule.exports = () => require("node:path").basename(__dirname);\n`);
    writeSource("cli/greet.ts", `import where from "where";\nexport const greet = (word: string, who: string): string => \`\${word} \${who} \${where()}\`;\n`);
    writeMain("at");
    const { stdout, stderr } = await capstan();
    expect(stdout).toBe("at hello where\n"); // the package found its own directory: it ran from node_modules
    expect(stderr).toMatch(/^capstan: running from the sources \(no bundle: node_modules\/where\/index\.js use __dirname or __filename.*externalPackages/);
    writeSource("cli/greet.ts", `import shout from "shout";\nexport const greet = (word: string, who: string): string => \`\${word} \${shout(who)}\`;\n`);
  }, 60_000);

  it("runs the sources through tsx with CAPSTAN_CLI_BUNDLE=0 or when the cache cannot be written", async () => {
    writeMain("tsx");
    const before = current().dir;
    expect((await capstan({ CAPSTAN_CLI_BUNDLE: "0" })).stdout).toBe("tsx HELLO\n");
    expect(current().dir).toBe(before); // not made again
    rmSync(join(project, "node_modules/.cache"), { recursive: true });
    writeFileSync(join(project, "node_modules/.cache"), "not a directory");
    const { stdout, stderr } = await capstan();
    expect(stdout).toBe("tsx HELLO\n");
    expect(stderr).toMatch(/^capstan: running from the sources \(no bundle: .+\)\n$/);
  }, 60_000);
});

describe("this repository's capstan command", () => {
  it("starts `capstan build` without loading gRPC or ssh2 (dockerode's BuildKit session and docker-modem's ssh transport are stubs)", async () => {
    // Every CommonJS module Node loaded, printed at exit.
    const hook = join(mkdtempSync(join(tmpdir(), "capstan-loaded-")), "hook.cjs");
    writeFileSync(hook, `process.on("exit", () => process.stderr.write("LOADED " + JSON.stringify(Object.keys(require("module")._cache)) + "\\n"));\n`);
    const { stdout, stderr } = await run(process.execPath, ["-r", hook, join(repo, "cli/bin/capstan.mjs"), "build", "-h"], { timeout: 60_000 });
    expect(stdout).toMatch(/^usage: capstan build/);
    // From the bundle: a bundled package that reads __dirname (a new dependency, say) makes it fail.
    expect(stderr).not.toMatch(/running from the sources/);
    const loaded = JSON.parse(/^LOADED (.*)$/m.exec(stderr)![1]!) as string[];
    expect(loaded).toContain(hook); // the listing works
    expect(loaded.filter((f) => /node_modules\/(@grpc|ssh2|protobufjs)\//.test(f))).toEqual([]);
    rmSync(dirname(hook), { recursive: true, force: true });
    // Nor are they in the bundle at all (a command that reached them would fail, not load them).
    const cacheDir = join(repo, "node_modules/.cache/capstan-cli");
    const records = readdirSync(cacheDir).map((d) => join(cacheDir, d, "current.json")).filter((f) => existsSync(f));
    const mine = records.map((f) => JSON.parse(readFileSync(f, "utf8")) as { inputs: [string][] }).find((r) => r.inputs.some(([p]) => p === "cli/commands/build.ts"));
    expect(mine).toBeDefined();
    expect(mine!.inputs.map(([p]) => p).filter((p) => /node_modules\/(@grpc|ssh2|protobufjs)\//.test(p))).toEqual([]);
  }, 60_000);
});
