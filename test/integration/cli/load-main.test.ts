// The `capstan` command runs from a cached esbuild bundle of its command's sources (docs/cli.md):
// made on the first start, reused while no source changed, made again when one did, run with V8's
// cache of its compiled code, and never in the way: CAPSTAN_CLI_BUNDLE=0 or a cache that cannot be
// written runs the sources through tsx. Checked on tiny projects of their own (cli/bin/load-main.mjs
// copied, a cli/main.ts that prints a word or runs one of two commands, CommonJS packages of their
// own in node_modules), with the real esbuild and tsx; and on this repository's own command, whose
// start must not load what the stubs replace, nor what the command does not use.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = join(import.meta.dirname, "../../..");

/** A project of its own: load-main.mjs and capstan.mjs copied, the real esbuild and tsx. */
function makeProject(): { project: string; writeSource: (path: string, text: string) => void } {
  const project = mkdtempSync(join(tmpdir(), "capstan-bundle-"));
  const writeSource = (path: string, text: string) => {
    const file = join(project, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    // Older than the next build's start, as a file saved before it would be (one saved during a
    // build is not recorded, so that the next start builds again).
    const past = new Date(Date.now() - 5_000);
    utimesSync(file, past, past);
  };
  mkdirSync(join(project, "cli/bin"), { recursive: true });
  mkdirSync(join(project, "node_modules"));
  for (const name of ["esbuild", "tsx"]) symlinkSync(join(repo, "node_modules", name), join(project, "node_modules", name));
  cpSync(join(repo, "cli/bin/capstan.mjs"), join(project, "cli/bin/capstan.mjs"));
  cpSync(join(repo, "cli/bin/load-main.mjs"), join(project, "cli/bin/load-main.mjs"));
  writeSource("package.json", JSON.stringify({ name: "capstan", type: "module" }));
  writeSource("tsconfig.json", JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true, noEmit: true } }));
  return { project, writeSource };
}

/** The project's one bundle directory (one checkout, one directory). */
function cacheOf(project: string): string {
  const dir = join(project, "node_modules/.cache/capstan-cli");
  const [only, ...more] = readdirSync(dir);
  expect(more).toEqual([]);
  return join(dir, only!);
}

interface BundleRecord {
  dir: string;
  inputs: [string, number, number][];
}

describe("the capstan command's bundle", () => {
  let project: string;
  let writeSource: (path: string, text: string) => void;
  const cache = () => cacheOf(project);
  // "hello" is no command (there is no cli/commands/hello.ts): the bundle of main.ts alone.
  const current = () => JSON.parse(readFileSync(join(cache(), "current.json"), "utf8")) as BundleRecord;
  const capstan = (env: Record<string, string> = {}) =>
    run(process.execPath, [join(project, "cli/bin/capstan.mjs"), "hello"], { env: { ...process.env, ...env }, timeout: 60_000 });
  const writeMain = (word: string) => {
    writeSource("cli/main.ts", `import { greet } from "./greet.ts";\nexport async function main(argv: string[]): Promise<number> {\n  console.log(greet("${word}", argv[0] ?? ""));\n  return 0;\n}\n`);
  };

  beforeAll(() => {
    ({ project, writeSource } = makeProject());
    // A CommonJS package that requires one of Node's modules: bundled, it needs the bundle's require().
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
    expect(readFileSync(join(cache(), current().dir, "main.cjs"), "utf8")).toContain("toUpperCase"); // bundled, not imported from node_modules
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

describe("a command's bundle", () => {
  let project: string;
  let writeSource: (path: string, text: string) => void;
  const capstan = (...argv: string[]) => run(process.execPath, [join(project, "cli/bin/capstan.mjs"), ...argv], { timeout: 60_000 });
  const record = (name: string) => JSON.parse(readFileSync(join(cacheOf(project), name), "utf8")) as BundleRecord;
  const bundleOf = (name: string) => join(cacheOf(project), record(name).dir, "main.cjs");

  beforeAll(() => {
    ({ project, writeSource } = makeProject());
    // As cli/main.ts: command NAME is ./commands/NAME.ts, imported when it runs.
    writeSource(
      "cli/main.ts",
      `const commands: Record<string, () => Promise<{ run(argv: string[]): Promise<number> }>> = {\n  greet: () => import("./commands/greet.ts"),\n  count: () => import("./commands/count.ts"),\n  meta: () => import("./commands/meta.ts"),\n  pkgmeta: () => import("./commands/pkgmeta.ts"),\n  ext: () => import("./commands/ext.ts"),\n};\nexport async function main(argv: string[]): Promise<number> {\n  const load = commands[argv[0] ?? ""];\n  if (load === undefined) {\n    console.log("usage");\n    return 0;\n  }\n  return (await load()).run(argv.slice(1));\n}\n`,
    );
    // `greet big` runs some 3,000 functions more than `greet`: much more code to compile.
    const many = Array.from({ length: 3000 }, (_, i) => `export function f${i}(x: number): number {\n  const y = x * ${i} + ${i % 7};\n  return y > ${i} ? y - ${i} : y + ${i};\n}\n`).join("");
    writeSource("cli/many.ts", `${many}export const all = [${Array.from({ length: 3000 }, (_, i) => `f${i}`).join(", ")}];\n`);
    writeSource(
      "cli/commands/greet.ts",
      `import { all } from "../many.ts";\nexport async function run(argv: string[]): Promise<number> {\n  const sum = argv[0] === "big" ? all.reduce((n, f) => f(n), 1) : 0;\n  console.log("GREET-MARK " + argv.join(" ") + (sum === 0 ? "" : " ran"));\n  return 0;\n}\n`,
    );
    // A bundled package that imports one of Node's modules with import(), which a CommonJS bundle
    // cannot do without Node's experimental loader (and its warning): the bundle makes it a require().
    writeSource("node_modules/cores/package.json", JSON.stringify({ name: "cores", version: "1.0.0", main: "index.js" }));
    writeSource("node_modules/cores/index.js", `module.exports = async () => (await import("node:os")).availableParallelism() > 0;\n`);
    writeSource("cli/commands/count.ts", `import cores from "cores";\nexport async function run(): Promise<number> {\n  console.log("COUNT-MARK " + String(await cores()));\n  return 0;\n}\n`);
    writeSource("cli/commands/meta.ts", `export async function run(): Promise<number> {\n  console.log("META " + typeof import.meta.dirname);\n  return 0;\n}\n`);
    // The same in a package (esbuild says nothing of it there), and import() of a package left to Node.
    writeSource("node_modules/metapkg/package.json", JSON.stringify({ name: "metapkg", version: "1.0.0", type: "module", main: "index.js" }));
    writeSource("node_modules/metapkg/index.js", `export const where = () => typeof import.meta.dirname;\n`);
    writeSource("cli/commands/pkgmeta.ts", `import { where } from "metapkg";\nexport async function run(): Promise<number> {\n  console.log("PKGMETA " + where());\n  return 0;\n}\n`);
    writeSource("cli/commands/ext.ts", `export async function run(): Promise<number> {\n  const esbuild = await import("esbuild");\n  console.log("EXT " + typeof esbuild.build);\n  return 0;\n}\n`);
    // A module of cli/commands that main.ts does not run as a command.
    writeSource("cli/commands/helper.ts", `export const helper = 1;\n`);
  });

  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it("holds its own command and not the others; no command, none", async () => {
    expect(await capstan("greet", "a", "b")).toEqual({ stdout: "GREET-MARK a b\n", stderr: "" });
    expect(await capstan("count")).toEqual({ stdout: "COUNT-MARK true\n", stderr: "" });
    expect(await capstan()).toEqual({ stdout: "usage\n", stderr: "" });
    expect(await capstan("helper")).toEqual({ stdout: "usage\n", stderr: "" }); // no command: main.ts alone
    expect(existsSync(join(cacheOf(project), "current-helper.json"))).toBe(false);
    const inputs = (name: string) => record(name).inputs.map(([path]) => path);
    expect(inputs("current-greet.json")).toContain("cli/commands/greet.ts");
    expect(inputs("current-greet.json")).not.toContain("cli/commands/count.ts");
    expect(inputs("current-count.json")).toEqual(expect.arrayContaining(["cli/commands/count.ts", "node_modules/cores/package.json"]));
    expect(inputs("current.json").filter((path) => path.startsWith("cli/commands/"))).toEqual([]);
    const greet = readFileSync(bundleOf("current-greet.json"), "utf8");
    expect(greet).toContain("GREET-MARK");
    expect(greet).not.toContain("COUNT-MARK");
    expect(readFileSync(bundleOf("current.json"), "utf8")).not.toMatch(/GREET-MARK|COUNT-MARK/);
  }, 60_000);

  it("runs with V8's code cache, written again only by a run that needed notably more code, or when V8 rejects it", async () => {
    const cacheFile = `${bundleOf("current-greet.json")}.v8cache`;
    const saved = () => readFileSync(cacheFile);
    const compiledBy = (cache: Buffer) => cache.readDoubleLE(0); // the header: the writer's compiled code
    expect(existsSync(cacheFile)).toBe(false); // not by the run that made the bundle (it ran esbuild too)
    expect(await capstan("greet")).toEqual({ stdout: "GREET-MARK \n", stderr: "" });
    const first = saved(); // written by the first run from the bundle
    expect(first.length).toBeGreaterThan(1000);
    expect(await capstan("greet")).toEqual({ stdout: "GREET-MARK \n", stderr: "" });
    expect(saved().equals(first)).toBe(true); // nothing new: not written
    expect(await capstan("greet", "big")).toEqual({ stdout: "GREET-MARK big ran\n", stderr: "" });
    const grown = saved();
    expect(compiledBy(grown)).toBeGreaterThan(compiledBy(first) * 1.1);
    expect(grown.length).toBeGreaterThan(first.length);
    await capstan("greet");
    await capstan("greet", "big");
    expect(saved().equals(grown)).toBe(true); // the cache now holds both runs' code
    // Not this V8's cache: rejected, the run compiles what it needs, and writes it again.
    writeFileSync(cacheFile, Buffer.concat([grown.subarray(0, 8), Buffer.from("not a code cache at all")]));
    expect(await capstan("greet", "c")).toEqual({ stdout: "GREET-MARK c\n", stderr: "" });
    expect(saved().length).toBeGreaterThan(1000);
    expect(readdirSync(dirname(cacheFile)).sort()).toEqual(["main.cjs", "main.cjs.v8cache"]);
  }, 60_000);

  it("is not made when a source uses import.meta beyond import.meta.url (empty in CommonJS): the sources run, and the line names the file", async () => {
    const { stdout, stderr } = await capstan("meta");
    expect(stdout).toBe("META string\n"); // through tsx, as an ES module
    expect(stderr).toMatch(/^capstan: running from the sources \(no bundle: cli\/commands\/meta\.ts:2 use import\.meta beyond import\.meta\.url/);
    const inPackage = await capstan("pkgmeta");
    expect(inPackage.stdout).toBe("PKGMETA string\n");
    expect(inPackage.stderr).toMatch(/^capstan: running from the sources \(no bundle: node_modules\/metapkg\/index\.js use import\.meta beyond import\.meta\.url/);
  }, 60_000);

  it("is not made when a source import()s a package left to Node (a CommonJS bundle would need Node's experimental loader): the sources run", async () => {
    const { stdout, stderr } = await capstan("ext");
    expect(stdout).toBe("EXT function\n");
    expect(stderr).toMatch(/^capstan: running from the sources \(no bundle: cli\/commands\/ext\.ts \(import\("esbuild"\)\) import\(\) a package left to Node/);
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
    // This checkout's (node_modules may be shared with another checkout's, by a symbolic link).
    const checkout = createHash("sha256").update(`${repo}/`).digest("hex").slice(0, 12);
    const mine = JSON.parse(readFileSync(join(cacheDir, checkout, "current-build.json"), "utf8")) as BundleRecord;
    const inputs = mine.inputs.map(([p]) => p);
    expect(inputs.filter((p) => /node_modules\/(@grpc|ssh2|protobufjs)\//.test(p))).toEqual([]);
    // Nor the other commands, nor the HTTP client that `capstan build` has no use for.
    expect(inputs.filter((p) => p.startsWith("cli/commands/"))).toEqual(["cli/commands/build.ts"]);
    expect(inputs.filter((p) => /node_modules\/undici\//.test(p))).toEqual([]);
  }, 60_000);
});
