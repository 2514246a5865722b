// The `capstan` command runs from a cached esbuild bundle of its sources (docs/cli.md): made on
// the first start, reused while no source changed, made again when one did, and never in the way:
// CAPSTAN_CLI_BUNDLE=0 or a cache that cannot be written runs the sources through tsx. Checked on
// a tiny project of its own (cli/bin/load-main.mjs copied, a cli/main.ts that prints a word), with
// the real esbuild and tsx.
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
    writeSource("cli/greet.ts", `export const greet = (word: string, who: string): string => \`\${word} \${who}\`;\n`);
    writeMain("hi");
  });

  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it("is made on the first start and records every source it was made from", async () => {
    const { stdout, stderr } = await capstan();
    expect(stdout).toBe("hi hello\n");
    expect(stderr).toBe("");
    const inputs = current().inputs.map(([path]) => path).sort();
    expect(inputs).toEqual(["cli/greet.ts", "cli/main.ts", "package.json", "tsconfig.json"]);
  }, 60_000);

  it("is reused while nothing changed, and made again when a source did", async () => {
    const first = current().dir;
    expect((await capstan()).stdout).toBe("hi hello\n");
    expect(current().dir).toBe(first);
    writeMain("bye");
    expect((await capstan()).stdout).toBe("bye hello\n");
    expect(current().dir).not.toBe(first);
  }, 60_000);

  it("is made again when its directory is gone, and tells the bundled code which checkout it is", async () => {
    rmSync(join(cache(), current().dir), { recursive: true });
    expect(await capstan()).toEqual({ stdout: "bye hello\n", stderr: "" });
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

  it("runs the sources through tsx with CAPSTAN_CLI_BUNDLE=0 or when the cache cannot be written", async () => {
    writeMain("tsx");
    const before = current().dir;
    expect((await capstan({ CAPSTAN_CLI_BUNDLE: "0" })).stdout).toBe("tsx hello\n");
    expect(current().dir).toBe(before); // not made again
    rmSync(join(project, "node_modules/.cache"), { recursive: true });
    writeFileSync(join(project, "node_modules/.cache"), "not a directory");
    const { stdout, stderr } = await capstan();
    expect(stdout).toBe("tsx hello\n");
    expect(stderr).toMatch(/^capstan: running from the sources \(no bundle: .+\)\n$/);
  }, 60_000);
});
