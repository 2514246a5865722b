// The application definition file (docs/deploy.md, "The application definition file"): what an app is called, how it
// is built, released and tested, the command of its web proc, and which secret files that proc
// gets. YAML; every problem is reported as `FILE:LINE: key.path: message`, at the line of the key
// (or value) that is wrong, so the user can go straight to it.
//
// Strictness, decided here and documented in docs/deploy.md:
// - Unknown keys INSIDE a known section (`web.secret_file`, `build.scripts`) are errors: a typo there
//   would silently change what is deployed (a proc without its secrets).
// - Unknown TOP-LEVEL keys are warnings: the original system's files carry sections this platform
//   does not read (worker procs, services, ...), and such a file must still deploy its web proc.
// App names are the console's (it registers them): a lower-case DNS label, so also a valid first
// segment of a proc name (`<app>.web.web`), a PodGroup namespace and a store key segment.
import { appNamePattern } from "../console/records.ts";
import { channelKindPattern, maxTargetLength } from "../resources/notify.ts";
import { isMap, isScalar, isSeq, type Pair } from "yaml";
import { readYaml } from "../yaml/reader.ts";

export interface CopyEntry {
  src: string;
  dest: string;
}

export interface WebProc {
  cmd: string;
  /** Absent: the deployer picks one and passes it in PORT. */
  port?: number;
  secretFiles: string[];
}

export interface AppDefinition {
  appname: string;
  /** `prepare`: the cache base made from `base` before builds (docs/build.md). */
  build?: { base?: string; script: string[]; prepare?: { version: string; script: string[] } };
  release?: { destBase?: string; copy: CopyEntry[] };
  test?: { script: string[] };
  web?: WebProc;
  /** Channel kind (e.g. "slack") -> channel. */
  notify: Record<string, string>;
}

export interface ParsedAppDefinition {
  definition: AppDefinition;
  /** Unknown top-level keys, each `FILE:LINE: key: ...`. */
  warnings: string[];
}

/** The file is not a valid definition; `problems` lists every one, each `FILE:LINE: key: message`. */
export class AppDefinitionError extends Error {
  override readonly name = "AppDefinitionError";
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(problems.join("\n"));
  }
}


const topLevelKeys = new Set(["appname", "build", "release", "test", "web", "notify"]);

/** Parse and validate a definition; throws AppDefinitionError listing every problem. */
export function parseAppDefinition(text: string, file: string): ParsedAppDefinition {
  const reader = readYaml(text, file);
  if ("syntax" in reader) throw new AppDefinitionError(file, reader.syntax);
  const { root, problems, at, fail, resolve, fields, string, strings, section } = reader;
  const warnings: string[] = [];
  if (!isMap(root)) {
    throw new AppDefinitionError(file, [`${at(root)}: the file must be a mapping of keys (appname: ..., web: ...)`]);
  }

  const def: Partial<AppDefinition> & { notify: Record<string, string> } = { notify: {} };
  let appnameSeen = false;
  fields(
    root,
    "",
    {
      appname: (v, key, pair) => {
        appnameSeen = true;
        const name = string(v, key, pair);
        if (name === undefined) return;
        if (!appNamePattern.test(name)) fail(v, key, `"${name}" must be a lower-case DNS label: a-z, 0-9 and inner "-", at most 63 characters`);
        else def.appname = name;
      },
      build: (v, key, pair) => {
        if (!section(v, key, pair)) return;
        const build: NonNullable<AppDefinition["build"]> = { script: [] };
        fields(v!, key, {
          base: (b, k, p) => (build.base = string(b, k, p)),
          script: (s, k, p) => (build.script = strings(s, k, p)),
          prepare: (pv, k, p) => {
            if (!section(pv, k, p)) return;
            const prepare: Partial<{ version: string; script: string[] }> = {};
            fields(pv!, k, {
              // A number (`version: 1`) is a version too: it names the prepare image's tag.
              version: (s, kk, pp) => {
                const v = isScalar(s) && typeof s.value === "number" ? String(s.value) : string(s, kk, pp);
                if (v !== undefined && !/^[A-Za-z0-9_.-]{1,40}$/.test(v)) fail(s, kk, `"${v}" must be 1..40 of A-Z, a-z, 0-9, "_", "." and "-" (it goes into an image tag)`);
                else prepare.version = v;
              },
              script: (s, kk, pp) => (prepare.script = strings(s, kk, pp)),
            });
            if (!(pv as { has(k: string): boolean }).has("version")) fail(p, `${k}.version`, "required, but missing");
            if (prepare.version !== undefined) build.prepare = { version: prepare.version, script: prepare.script ?? [] };
          },
        });
        def.build = build;
      },
      release: (v, key, pair) => {
        if (!section(v, key, pair)) return;
        const release: NonNullable<AppDefinition["release"]> = { copy: [] };
        fields(v!, key, {
          dest_base: (b, k, p) => (release.destBase = string(b, k, p)),
          copy: (list, k, p) => {
            if (!isSeq(list)) return void fail(list ?? p, k, "must be a list of {src, dest}");
            list.items.forEach((raw, i) => {
              const item = resolve(raw);
              const where = `${k}[${i}]`;
              if (!isMap(item)) return void fail(item ?? p, where, "must be a mapping {src, dest}");
              const entry: Partial<CopyEntry> = {};
              fields(item, where, { src: (s, kk, pp) => (entry.src = string(s, kk, pp)), dest: (d, kk, pp) => (entry.dest = string(d, kk, pp)) });
              for (const need of ["src", "dest"] as const) if (!item.has(need)) fail(item, `${where}.${need}`, "required, but missing");
              if (entry.src !== undefined && entry.dest !== undefined) release.copy.push({ src: entry.src, dest: entry.dest });
            });
          },
        });
        def.release = release;
      },
      test: (v, key, pair) => {
        if (!section(v, key, pair)) return;
        const test = { script: [] as string[] };
        fields(v!, key, { script: (s, k, p) => (test.script = strings(s, k, p)) });
        def.test = test;
      },
      web: (v, key, pair) => {
        if (!section(v, key, pair)) return;
        const web: Partial<WebProc> & { secretFiles: string[] } = { secretFiles: [] };
        fields(v!, key, {
          cmd: (c, k, p) => (web.cmd = string(c, k, p)),
          port: (n, k, p) => {
            if (isScalar(n) && typeof n.value === "number" && Number.isInteger(n.value) && n.value >= 1 && n.value <= 65535) web.port = n.value;
            else fail(n ?? p, k, "must be an integer 1..65535");
          },
          secret_files: (list, k, p) => {
            const seen = new Set<string>();
            if (!isSeq(list)) return void fail(list ?? p, k, "must be a list of file paths");
            list.items.forEach((raw, i) => {
              const item = resolve(raw);
              const path = string(item, `${k}[${i}]`, p);
              if (path === undefined) return;
              const problem = secretFileProblem(path);
              if (problem) fail(item, `${k}[${i}]`, problem);
              else if (seen.has(path)) fail(item, `${k}[${i}]`, `"${path}" is listed twice`);
              else {
                seen.add(path);
                web.secretFiles.push(path);
              }
            });
          },
        });
        if (!(v as { has(k: string): boolean }).has("cmd")) fail(pair, `${key}.cmd`, "required, but missing");
        if (web.cmd !== undefined) def.web = { cmd: web.cmd, port: web.port, secretFiles: web.secretFiles };
      },
      notify: (v, key, pair) => {
        if (!section(v, key, pair)) return;
        for (const p of (v as { items: Pair[] }).items) {
          const channel = isScalar(p.key) ? String(p.key.value) : "";
          const value = string(resolve(p.value), `${key}.${channel}`, p);
          if (value === undefined) continue;
          // The orchestrator stores these as the app's notify routes (docs/notify.md): refused here as it would refuse them.
          if (!channelKindPattern.test(channel)) fail(p, `${key}.${channel}`, "a channel kind must be a lower-case word: a-z first, then a-z, 0-9, _ or -, at most 32 characters");
          else if (value === "" || value.length > maxTargetLength || [...value].some((ch) => ch.charCodeAt(0) < 0x20)) fail(resolve(p.value) ?? p, `${key}.${channel}`, `must be a channel name of 1..${maxTargetLength} characters without control characters`);
          else def.notify[channel] = value;
        }
      },
    },
    (key, pair) => {
      if (!topLevelKeys.has(key)) warnings.push(`${at(pair)}: ${key}: unknown key, ignored (known: ${[...topLevelKeys].join(", ")})`);
    },
  );
  if (!appnameSeen) fail(root, "appname", "required, but missing");
  if (problems.length > 0) throw new AppDefinitionError(file, problems);
  return { definition: def as AppDefinition, warnings };
}

/**
 * Why `path` may not be a secret file path, or undefined. `..` would let a file escape the app
 * directory (or reach another record's path); NUL cannot be in a file name. The secrets service
 * refuses the same paths, so a definition never lists a file that could not have been written.
 */
export function secretFileProblem(path: string): string | undefined {
  if (path.includes("\0")) return "must not contain NUL bytes";
  if (path.split("/").includes("..")) return `"${path}" must not contain ".." segments`;
  if (path.endsWith("/")) return `"${path}" must name a file, not a directory`;
  return undefined;
}
