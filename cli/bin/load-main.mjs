// How the `capstan` command loads its TypeScript sources. tsx compiles each of some 340 modules on
// every start: about 0.4 s on a quiet machine, over a second on a busy one. Instead each command
// runs from a bundle of its own sources, made by esbuild (the compiler tsx itself uses): cli/main.ts
// with that command's module and what it imports, not the other commands'. A bundle is a CommonJS
// file run as Node runs one, but with V8's cache of its compiled code (runBundle), so a start
// neither reads nor compiles code its command does not run: `capstan build -h` starts in about
// 0.11 s, where `node -e ""` takes 0.07 s (docs/cli.md). Bundles are only a cache, under
// node_modules/.cache/capstan-cli: made on a command's first start, made again when any source file
// in it (or tsconfig.json, package.json, this file, esbuild, a bundled package's package.json,
// node_modules/.package-lock.json) changed, so editing a source needs no build step.
//
// The packages the sources import are bundled too, but for those in `externalPackages`: Node
// resolving and compiling some 400 files of undici, dockerode, yaml and zod one by one was most of
// a command's start. Two modules dockerode always loads and Capstan never uses are replaced by
// stubs that throw if called, which keeps gRPC and ssh2 out of every command's start: dockerode's
// BuildKit session (Capstan builds with containers and commits, never with the engine's builder)
// and docker-modem's ssh transport (an ssh:// endpoint is refused before any connection,
// adapters/cluster/spec.ts, and no client takes its engine from DOCKER_HOST:
// adapters/cluster/docker-client.ts).
// CAPSTAN_CLI_BUNDLE=0 runs the sources through tsx instead; so does a bundle that cannot be made
// (a read-only node_modules, say), with one line on standard error saying why.
import { Buffer } from "node:buffer";
import { createHash, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { Module, createRequire, isBuiltin } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getHeapCodeStatistics } from "node:v8";
import { Script, constants as vmConstants } from "node:vm";

const root = fileURLToPath(new URL("../../", import.meta.url));
// One directory per checkout: two checkouts sharing a node_modules (a symbolic link) keep
// separate bundles rather than replacing each other's on every start.
const cacheDir = join(root, "node_modules", ".cache", "capstan-cli", createHash("sha256").update(root).digest("hex").slice(0, 12));
/** A bundle directory's code; its V8 code cache is `${bundleFile}.v8cache`. */
const bundleFile = "main.cjs";
/** The code cache's header: the compiled code (bytes) of the run that wrote it, a double. */
const codeCacheHeader = 8;
/** A run that ends with this much more compiled code than the cache's writer writes it again. */
const codeCacheGrowth = 1.1;
/** Files that shape the bundle besides the sources esbuild reports reading (this file: how it is made). */
const alwaysInputs = ["tsconfig.json", "package.json", "cli/bin/load-main.mjs"];
/**
 * Packages left to Node's own loader: native code, files read next to their own modules (etcd3's
 * and gRPC's .proto files, pino's worker transports), tools, and optional native add-ons that a
 * package tries to load and does without.
 */
const externalPackages = new Set([
  "better-sqlite3",
  "etcd3",
  "@grpc/grpc-js",
  "@grpc/proto-loader",
  "pino",
  "thread-stream",
  "pino-pretty",
  "oidc-provider",
  "playwright-core",
  "esbuild",
  "tsx",
  "bufferutil",
  "utf-8-validate",
  "cpu-features",
]);
/** Modules replaced by a stub that throws when used (see the top): [specifier, importer pattern, what]. */
const stubbed = [
  [/^\.\/session$/, /[\\/]node_modules[\\/]dockerode[\\/]lib[\\/]/, "BuildKit sessions"],
  // Docker.followProgress (BuildKit's): Capstan follows pulls and pushes with modem.followProgress.
  [/^\.\/buildkit$/, /[\\/]node_modules[\\/]dockerode[\\/]lib[\\/]/, "BuildKit builds"],
  [/^ssh2$/, /[\\/]node_modules[\\/]docker-modem[\\/]lib[\\/]/, "ssh:// Docker hosts"],
];
/** Older bundles are removed after a day, not at once: a process may be about to read one. */
const keepOldMs = 24 * 60 * 60 * 1000;

/**
 * esbuild as tsx has it (tsx's own dependency, whatever the package manager's layout), so the
 * bundle is made by the compiler that would otherwise run the sources.
 */
const requireFromTsx = createRequire(createRequire(import.meta.url).resolve("tsx/package.json"));

/** The CLI's main(argv) from the bundle of argv's command when possible, from the sources through tsx otherwise. */
export async function loadMain(argv = []) {
  if (process.env.CAPSTAN_CLI_BUNDLE !== "0") {
    const command = commandOf(argv);
    let bundle;
    try {
      // A current bundle removed since it was found (an old one, by another start): make one.
      bundle = readBundle(freshBundle(command)) ?? { ...readBundle(await makeBundle(command), true), made: true };
    } catch (error) {
      process.stderr.write(`capstan: running from the sources (no bundle: ${error?.message ?? error})\n`);
    }
    if (bundle !== undefined) {
      // The checkout the bundle was made from: its modules' own URLs are under node_modules, which
      // may be another checkout's (a symbolic link); runtime/package-root.ts reads this first.
      globalThis[Symbol.for("capstan.packageRoot")] = root;
      // Errors from here on are the code's own, not the bundle's: no second run through tsx.
      return runBundle(bundle).main;
    }
  }
  const { register } = await import("tsx/esm/api");
  register();
  return (await import("../main.ts")).main;
}

/**
 * The command a start runs, whose bundle it loads: cli/main.ts imports command NAME as
 * import("./commands/NAME.ts"). None (usage, --version, an unknown word, a module of
 * cli/commands that is not a command of its own): a bundle of main.ts alone.
 */
function commandOf(argv) {
  const name = argv[0];
  if (typeof name !== "string" || !/^[a-z][a-z0-9-]*$/.test(name)) return undefined;
  try {
    return readFileSync(join(root, "cli", "main.ts"), "utf8").includes(`import("./commands/${name}.ts")`) ? name : undefined;
  } catch {
    return undefined; // then the bundle fails to be made, and says why
  }
}

/** Where the record of a command's current bundle is. */
const recordOf = (command) => join(cacheDir, command === undefined ? "current.json" : `current-${command}.json`);

/** The command's current bundle directory if every file it was made from is unchanged. */
function freshBundle(command) {
  let current;
  try {
    current = JSON.parse(readFileSync(recordOf(command), "utf8"));
  } catch {
    return undefined;
  }
  if (typeof current?.dir !== "string" || !Array.isArray(current.inputs) || current.esbuild !== esbuildVersion()) return undefined;
  // A record made by an older load-main.mjs may lack one of them (then this file changed since).
  if (!alwaysInputs.every((path) => current.inputs.some((input) => input?.[0] === path))) return undefined;
  for (const input of current.inputs) {
    try {
      const [path, size, mtimeMs] = input;
      const s = statSync(join(root, path));
      if (s.size !== size || s.mtimeMs !== mtimeMs) return undefined;
    } catch {
      return undefined;
    }
  }
  return join(cacheDir, current.dir);
}

async function makeBundle(command) {
  const esbuild = requireFromTsx("esbuild");
  const startedMs = Date.now();
  const dir = `${command ?? "main"}-${startedMs.toString(36)}-${randomUUID().slice(0, 8)}`;
  const out = join(cacheDir, dir);
  mkdirSync(cacheDir, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: ["cli/main.ts"],
    bundle: true,
    // CommonJS, one file: a vm.Script, whose compiled code V8 can cache (runBundle); Node 20 has
    // no such cache for ES modules.
    format: "cjs",
    platform: "node",
    target: "node20",
    outfile: join(out, bundleFile),
    metafile: true,
    logLevel: "silent",
    plugins: [commandPlugin(command), packagesPlugin],
    define: { "import.meta.url": "__capstanImportMetaUrl" },
    // Strict, as the ES modules it is made of are.
    banner: { js: '"use strict";\nvar __capstanImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
  });
  // Any other use of import.meta would be an empty object in CommonJS, and import() of a package
  // left to Node would need Node's experimental loader: refuse, rather than run wrong or warn.
  // (esbuild warns of the first only outside node_modules and try blocks: its output tells.)
  const refusal = bundleRefusal(result, readFileSync(join(out, bundleFile), "utf8"));
  if (refusal !== undefined) {
    rmSync(out, { recursive: true, force: true });
    throw new Error(refusal);
  }
  // A bundled package counts by its package.json (its version), not by each of its files; and
  // npm rewrites node_modules/.package-lock.json on every install. (A file edited by hand inside
  // node_modules is not noticed: docs/cli.md.)
  const sources = Object.keys(result.metafile.inputs).filter((path) => !/^capstan-[a-z-]+:/.test(path));
  const misplaced = sources.filter((path) => path.includes("node_modules/") && readsOwnLocation(readFileSync(join(root, path), "utf8")));
  if (misplaced.length > 0) {
    rmSync(out, { recursive: true, force: true });
    throw new Error(`${misplaced.join(", ")} use __dirname or __filename, which a bundle changes: list their packages in externalPackages (cli/bin/load-main.mjs)`);
  }
  const packageFiles = new Set(sources.flatMap((path) => packageJsonOf(path) ?? []));
  const optional = ["node_modules/.package-lock.json"].filter((path) => existsSync(join(root, path)));
  let inputs;
  try {
    inputs = [...new Set([...alwaysInputs, ...optional, ...sources.filter((path) => !path.includes("node_modules/")), ...packageFiles])].map((path) => {
      const s = statSync(join(root, path));
      return [path, s.size, s.mtimeMs];
    });
  } catch (error) {
    rmSync(out, { recursive: true, force: true });
    throw error;
  }
  // A source saved while esbuild read it may be in the bundle in its old form: use this bundle
  // once, but do not record it, so the next start makes a new one. (The margin covers file times
  // taken from a coarser clock than Date.now().)
  if (inputs.every(([, , mtimeMs]) => mtimeMs < startedMs - 50)) {
    const record = recordOf(command);
    const tmp = `${record}.${randomUUID()}.tmp`;
    writeFileSync(tmp, JSON.stringify({ dir, esbuild: esbuildVersion(), inputs }));
    renameSync(tmp, record);
  }
  removeOldBundles(dir);
  return out;
}

/** A bundle directory's code, or undefined if it is gone (unless `required`: then its error). */
function readBundle(dir, required = false) {
  if (dir === undefined) return undefined;
  const file = join(dir, bundleFile);
  try {
    return { file, source: readFileSync(file, "utf8") };
  } catch (error) {
    if (required || error?.code !== "ENOENT") throw error;
    return undefined;
  }
}

/**
 * Runs a bundle as Node runs a CommonJS module, with V8's cache of its compiled code: without it,
 * V8 parses and compiles every function a command runs on every start. The cache is written when
 * the process exits, with what that run compiled (what the cache held included), and headed by
 * how much code the run compiled from the bundle on. A later run writes it again only when it needed
 * notably more (a real `capstan build` after a `capstan build -h`), so the cache grows to what the
 * command's runs use and is not rewritten on every start; and when V8 rejects it (another Node,
 * other V8 flags).
 */
function runBundle({ file, source, made = false }) {
  const cacheFile = `${file}.v8cache`;
  let cachedData;
  let cachedFor = 0;
  try {
    const saved = readFileSync(cacheFile);
    if (saved.length > codeCacheHeader) {
      cachedFor = saved.readDoubleLE(0);
      cachedData = saved.subarray(codeCacheHeader);
    }
  } catch {
    // None yet.
  }
  // What this run compiles is counted from here: not what came before (esbuild, when this start
  // made the bundle), which would make the header too large for a later run to outgrow.
  const before = getHeapCodeStatistics().bytecode_and_metadata_size;
  const script = new Script(Module.wrap(source), {
    filename: file,
    cachedData,
    // esbuild turns import() of a bundled module or of one of Node's into a require(); any other
    // (a package's import() of a computed name) loads as in a module, with Node's warning.
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const accepted = cachedData !== undefined && script.cachedDataRejected === false;
  // The start that made the bundle ran esbuild too, which makes its count no measure: it leaves the
  // cache to the next.
  process.once("exit", () => {
    if (made) return;
    const compiled = getHeapCodeStatistics().bytecode_and_metadata_size - before;
    if (accepted && compiled <= cachedFor * codeCacheGrowth) return;
    const tmp = `${cacheFile}.${randomUUID()}.tmp`;
    try {
      const header = Buffer.alloc(codeCacheHeader);
      header.writeDoubleLE(compiled, 0);
      writeFileSync(tmp, Buffer.concat([header, script.createCachedData()]));
      renameSync(tmp, cacheFile);
    } catch {
      // A read-only cache, a full disk, or the bundle removed meanwhile: the next start compiles again.
      rmSync(tmp, { force: true });
    }
  });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

/** Why a made bundle must not run (see makeBundle), or undefined. */
function bundleRefusal(result, code) {
  const emptied = result.warnings.filter((w) => w.id === "empty-import-meta").map((w) => `${w.location?.file}:${w.location?.line}`);
  const silent = /\bimport_meta\d* = \{\}/.exec(code);
  if (emptied.length > 0 || silent !== null) {
    // esbuild heads each module's code with a comment naming its file.
    const at = emptied.length > 0 ? emptied.join(", ") : (/^\/\/ (\S+)$/m.exec(code.slice(code.lastIndexOf("\n// ", silent.index) + 1))?.[1] ?? "a bundled module");
    return `${at} use import.meta beyond import.meta.url, which a CommonJS bundle has not: use import.meta.url`;
  }
  const imported = Object.entries(result.metafile.inputs).flatMap(([path, input]) =>
    input.imports.filter((i) => i.kind === "dynamic-import" && i.external && !isBuiltin(i.path)).map((i) => `${path} (import("${i.path}"))`),
  );
  if (imported.length > 0) return `${imported.join(", ")} import() a package left to Node, which a CommonJS bundle cannot: import it statically`;
  return undefined;
}

/**
 * esbuild plugin: in a command's bundle, main.ts's imports of the other commands are left out
 * (each process runs one command, so its start reads and compiles only that command's code);
 * import() of one of Node's modules becomes a require().
 */
function commandPlugin(command) {
  const mainFile = join(root, "cli", "main.ts");
  return {
    name: "capstan-command",
    setup(build) {
      build.onResolve({ filter: /^\.\/commands\/[^/]+\.ts$/ }, (args) =>
        args.importer === mainFile && args.path !== `./commands/${command}.ts` ? { path: args.path, namespace: "capstan-other-command" } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: "capstan-other-command" }, (args) => ({
        contents: `throw new Error(${JSON.stringify(`capstan: ${args.path} is not in the bundle of ${command === undefined ? "no command" : `capstan ${command}`} (cli/bin/load-main.mjs)`)});\n`,
        loader: "js",
      }));
      build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) =>
        args.kind === "dynamic-import" && isBuiltin(args.path) ? { path: args.path, namespace: "capstan-builtin" } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: "capstan-builtin" }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});\n`, loader: "js" }));
    },
  };
}

/** esbuild plugin: bare imports bundled unless in externalPackages; the stubs above. */
const packagesPlugin = {
  name: "capstan-packages",
  setup(build) {
    for (const [filter, importer, what] of stubbed) {
      build.onResolve({ filter }, (args) => (importer.test(args.importer) ? { path: what, namespace: "capstan-stub" } : undefined));
    }
    build.onLoad({ filter: /.*/, namespace: "capstan-stub" }, (args) => ({
      // A function (the session), with the names the others are used by (ssh2's Client, buildkit's followProgress).
      contents: `function fail() { throw new Error(${JSON.stringify(`capstan: ${args.path} are not supported`)}); }\nfail.Client = fail;\nfail.followProgress = fail;\nmodule.exports = fail;\n`,
      loader: "js",
    }));
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith("node:")) return { path: args.path, external: true };
      const name = args.path.split("/").slice(0, args.path.startsWith("@") ? 2 : 1).join("/");
      return externalPackages.has(name) ? { path: args.path, external: true } : undefined;
    });
  },
};

/**
 * Whether a package file uses __dirname or __filename (to find files next to itself, as a rule):
 * in the bundle they would name the bundle's directory, or nothing. A use guarded by `typeof`, or
 * in a comment line, is fine.
 */
function readsOwnLocation(text) {
  if (!text.includes("__dirname") && !text.includes("__filename")) return false;
  return text.split("\n").some((line) => {
    const code = line.trim();
    if (code.startsWith("//") || code.startsWith("*") || code.startsWith("/*")) return false;
    return /\b__(dirname|filename)\b/.test(code) && !/typeof\s+__(dirname|filename)\b/.test(code);
  });
}

/**
 * The package.json of a bundled file's package (node_modules/<package>/, the innermost), else the
 * nearest one above the file, else the file itself.
 */
function packageJsonOf(path) {
  const at = path.lastIndexOf("node_modules/");
  if (at < 0) return undefined;
  const base = path.slice(0, at + "node_modules/".length);
  const parts = path.slice(base.length).split("/").slice(0, -1);
  const rootLength = parts[0]?.startsWith("@") ? 2 : 1;
  for (const n of [rootLength, ...Array.from({ length: parts.length }, (_, i) => parts.length - i)]) {
    if (n < 1 || n > parts.length) continue;
    const candidate = `${base}${parts.slice(0, n).join("/")}/package.json`;
    if (existsSync(join(root, candidate))) return candidate;
  }
  return path;
}

function esbuildVersion() {
  return requireFromTsx("esbuild/package.json").version;
}

/** Bundles made over a day ago, except the one just made and the current ones (one per command). */
function removeOldBundles(keep) {
  const current = new Set();
  for (const entry of readdirSync(cacheDir)) {
    if (!/^current(-[a-z0-9-]+)?\.json$/.test(entry)) continue;
    try {
      current.add(JSON.parse(readFileSync(join(cacheDir, entry), "utf8")).dir);
    } catch {
      // Being replaced: its new bundle is younger than a day.
    }
  }
  for (const entry of readdirSync(cacheDir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name === keep || current.has(entry.name)) continue;
    const path = join(cacheDir, entry.name);
    try {
      if (Date.now() - statSync(path).mtimeMs > keepOldMs) rmSync(path, { recursive: true, force: true });
    } catch {
      // Another process removed it first.
    }
  }
}
