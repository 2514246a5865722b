// The registry's configuration file: distribution's config.yaml (version 0.1), read the way
// distribution reads it, so that an existing registry's file (the original platform's included)
// runs unchanged. What Capstan does with each key (docs/registry.md, "Running the registry"):
//
//   used        version, log.level, log.fields, storage.filesystem.rootdirectory,
//               storage.s3.{accesskey, secretkey, region, regionendpoint, bucket, secure, v4auth,
//               chunksize, rootdirectory}, storage.delete.enabled,
//               auth.token.{realm, issuer, service, rootcertbundle}, http.addr, http.headers
//   tolerated   http.secret, http.host, http.net (tcp), compatibility.schema1.disablesignaturestore:
//               accepted without a word (nothing to do for them)
//   warned      keys of distribution's configuration Capstan does not act on (storage.cache.*,
//               storage.maintenance.*, storage.redirect, http.tls, notifications, redis, health,
//               middleware, proxy, ...), and nested keys distribution does not know either (a typo
//               like storage.filesystem.rootdir): each is a warning naming the key and its line;
//               the registry starts
//   errors      a file that is not YAML, a wrong type (a map where a string belongs, "maybe" for a
//               boolean), two storage backends or none, a backend or auth type Capstan cannot run
//               (azure, htpasswd, ...), a missing required key (storage.s3.bucket), a top-level key
//               that is no section of distribution's configuration. Each names the key and the line.
//
// REGISTRY_* environment variables override the file as distribution's do: the name after
// REGISTRY_ is the key's path in upper case with "_" between the levels
// (REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY, REGISTRY_AUTH_TOKEN_REALM), the value is read as YAML
// (true, 5000, a string), and it replaces what the file has at that path, subtree included:
// REGISTRY_AUTH="" removes the auth section, which is how the original platform's entry.sh turned
// token auth off. Variables are applied in name order, so a parent is replaced before its children
// are set. A REGISTRY_ variable whose first level is no section of the configuration is ignored
// with a warning (Kubernetes' REGISTRY_PORT, REGISTRY_SERVICE_HOST of a service named registry).
//
// Keys are case-sensitive in the file (distribution's are lower case); values that distribution
// would take are taken: any scalar for a string (version: 0.1 is "0.1"), YAML 1.1 booleans
// (yes/no/on/off) and "true"/"false" for a boolean, a number or a string of digits for an integer.
import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document } from "yaml";

// ---------------------------------------------------------------------------------------------
// The typed result

export type RegistryLogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal";

export interface FilesystemStorageConfig {
  driver: "filesystem";
  /** storage.filesystem.rootdirectory, as written (default /var/lib/registry, distribution's). */
  rootDirectory: string;
}

export interface S3StorageConfig {
  driver: "s3";
  /** Both or neither; neither: the AWS SDK's default credential chain (environment, profile, instance role). */
  accessKey?: string;
  secretKey?: string;
  region: string;
  /** An S3-compatible endpoint URL; path-style addressing is used when it is set. */
  regionEndpoint?: string;
  bucket: string;
  /** HTTPS to the endpoint (default true). */
  secure: boolean;
  /** Signature V4 (default true). */
  v4auth: boolean;
  /** Multipart part size in bytes, 5 MiB..5 GiB (the driver's default when absent). */
  chunkSize?: number;
  /** Key prefix inside the bucket (default: the bucket's root). */
  rootDirectory?: string;
}

export type StorageConfig = FilesystemStorageConfig | S3StorageConfig;

/** auth.token. realm, issuer and service are all given or all absent (then they come from the store key). */
export interface TokenAuthConfig {
  realm?: string;
  issuer?: string;
  service?: string;
  /** Path of the PEM file with the authorization server's certificate(s) (not its contents). */
  rootCertBundle: string;
}

export interface RegistryConfig {
  /** Always "0.1". */
  version: string;
  log: {
    /** log.level (or the deprecated top-level loglevel); undefined: Capstan's default. */
    level?: RegistryLogLevel;
    /** log.fields: added to every log line. */
    fields: Record<string, unknown>;
  };
  storage: StorageConfig;
  /** storage.delete.enabled: DELETE of manifests and blobs is allowed (default false: 405 UNSUPPORTED). */
  deleteEnabled: boolean;
  /** auth.token; undefined: no token auth configured in the file. */
  tokenAuth?: TokenAuthConfig;
  http: {
    /** http.addr, e.g. ":5000" (the listen address when -web is not given). */
    addr?: string;
    /** http.host: the registry's external URL (tolerated; Capstan's API answers with relative Locations). */
    host?: string;
    /** http.secret (tolerated: upload state is kept in storage, not in HMAC-signed URLs). */
    secret?: string;
    /** http.headers: added to every registry response. */
    headers: Record<string, string[]>;
  };
}

/** One error or warning: the key's dotted path, where it was set, and what is wrong. */
export interface ConfigProblem {
  key: string;
  /** 1-based line (and column) in the file, when the key comes from the file. */
  line?: number;
  column?: number;
  /** The REGISTRY_* variable that set the key, when it comes from the environment. */
  env?: string;
  message: string;
}

export type ConfigResult =
  | { ok: true; config: RegistryConfig; warnings: ConfigProblem[] }
  | { ok: false; errors: ConfigProblem[]; warnings: ConfigProblem[] };

/** "config.yaml:12: storage.s3.chunksize: ...", or "config.yaml: storage.s3.region (REGISTRY_STORAGE_S3_REGION): ...". */
export function formatProblem(p: ConfigProblem, file = "config.yaml"): string {
  if (p.env !== undefined) return `${file}: ${p.key} (from ${p.env}): ${p.message}`;
  if (p.line !== undefined) return `${file}:${p.line}: ${p.key}: ${p.message}`;
  return `${file}: ${p.key}: ${p.message}`;
}

/** The prefix of the variables that override the file. */
export const registryEnvPrefix = "REGISTRY_";

/** distribution's default storage.filesystem.rootdirectory. */
export const defaultRootDirectory = "/var/lib/registry";

// ---------------------------------------------------------------------------------------------
// A tree of the file's values that remembers where each came from

type Origin = { line: number; column: number } | { env: string } | { none: true };

type CNode =
  | { kind: "map"; origin: Origin; entries: CEntry[] }
  | { kind: "seq"; origin: Origin; items: CNode[] }
  | { kind: "scalar"; origin: Origin; value: string | number | boolean | null; text: string };

interface CEntry {
  key: string;
  origin: Origin;
  value: CNode;
}

function fromYaml(node: unknown, doc: Document, lc: LineCounter, fallback: Origin, env: string | undefined, depth = 0): CNode {
  const at = (range: readonly number[] | null | undefined): Origin => {
    if (env !== undefined) return { env };
    if (!range) return fallback;
    const p = lc.linePos(range[0]!);
    return { line: p.line, column: p.col };
  };
  if (isAlias(node)) {
    if (depth > 50) return { kind: "scalar", origin: at(node.range), value: null, text: "" };
    return fromYaml(node.resolve(doc), doc, lc, at(node.range), env, depth + 1);
  }
  if (isMap(node)) {
    const origin = at(node.range);
    const entries: CEntry[] = [];
    for (const pair of node.items) {
      const k = pair.key;
      const keyOrigin = isScalar(k) || isMap(k) || isSeq(k) ? at(k.range) : origin;
      const key = isScalar(k) ? String(k.value) : String(k);
      entries.push({ key, origin: keyOrigin, value: fromYaml(pair.value, doc, lc, keyOrigin, env, depth + 1) });
    }
    return { kind: "map", origin, entries };
  }
  if (isSeq(node)) {
    return { kind: "seq", origin: at(node.range), items: node.items.map((i) => fromYaml(i, doc, lc, at(node.range), env, depth + 1)) };
  }
  if (isScalar(node)) {
    const v = node.value;
    const value = v === null || v === undefined ? null : typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? v : String(v);
    const text = typeof v === "string" ? v : (node.source ?? (value === null ? "" : String(value)));
    return { kind: "scalar", origin: at(node.range), value, text };
  }
  return { kind: "scalar", origin: fallback, value: null, text: "" };
}

// ---------------------------------------------------------------------------------------------
// Problems

class Problems {
  readonly errors: ConfigProblem[] = [];
  readonly warnings: ConfigProblem[] = [];

  error(key: string, origin: Origin, message: string): void {
    this.errors.push(problem(key, origin, message));
  }

  warn(key: string, origin: Origin, message: string): void {
    this.warnings.push(problem(key, origin, message));
  }
}

function problem(key: string, origin: Origin, message: string): ConfigProblem {
  if ("env" in origin) return { key, env: origin.env, message };
  if ("line" in origin) return { key, line: origin.line, column: origin.column, message };
  return { key, message };
}

const notUsed = "not used by Capstan's registry; ignored";

function kindName(n: CNode): string {
  if (n.kind === "map") return "a map";
  if (n.kind === "seq") return "a list";
  if (n.value === null) return "empty";
  return JSON.stringify(n.value);
}

/** The entries of a map node (null: none). Anything else is an error; answers undefined then. */
function entriesOf(p: Problems, key: string, node: CNode): CEntry[] | undefined {
  if (node.kind === "map") return node.entries;
  if (node.kind === "scalar" && node.value === null) return [];
  p.error(key, node.origin, `must be a map of keys, not ${node.kind === "seq" ? "a list" : kindName(node)}`);
  return undefined;
}

interface SectionSpec {
  /** Keys read here. */
  used: readonly string[];
  /** Keys accepted without a warning, not read. */
  tolerated?: readonly string[];
  /** Keys distribution knows and Capstan does not act on: a warning each (message per key, or notUsed). */
  ignored?: Readonly<Record<string, string>>;
}

/**
 * The used entries of a section by key; warnings for ignored and unknown ones. A key that appears
 * twice is refused by the YAML parser already.
 */
function section(p: Problems, path: string, node: CNode, spec: SectionSpec): Map<string, CEntry> | undefined {
  const entries = entriesOf(p, path, node);
  if (!entries) return undefined;
  const out = new Map<string, CEntry>();
  for (const e of entries) {
    const key = `${path}.${e.key}`;
    if (spec.used.includes(e.key)) out.set(e.key, e);
    else if (spec.tolerated?.includes(e.key)) continue;
    else if (spec.ignored && Object.hasOwn(spec.ignored, e.key)) p.warn(key, e.origin, spec.ignored[e.key]!);
    else {
      const all = [...spec.used, ...(spec.tolerated ?? []), ...Object.keys(spec.ignored ?? {})];
      const near = all.find((k) => k === e.key.toLowerCase());
      p.warn(key, e.origin, `not a key of distribution's configuration${near ? ` (keys are lower case: ${path}.${near})` : ""}; ignored`);
    }
  }
  return out;
}

function isNull(n: CNode): boolean {
  return n.kind === "scalar" && n.value === null;
}

/** A string value: any scalar, as written. null → undefined. */
function str(p: Problems, key: string, e: CEntry | undefined, opts: { nonEmpty?: boolean } = {}): string | undefined {
  if (!e || isNull(e.value)) return undefined;
  const n = e.value;
  if (n.kind !== "scalar") {
    p.error(key, e.origin, `must be a string, not ${kindName(n)}`);
    return undefined;
  }
  if (opts.nonEmpty && n.text.trim() === "") {
    p.error(key, e.origin, "must not be empty");
    return undefined;
  }
  return n.text;
}

const yes = new Set(["y", "yes", "true", "on", "t", "1"]);
const no = new Set(["n", "no", "false", "off", "f", "0"]);

function bool(p: Problems, key: string, e: CEntry | undefined): boolean | undefined {
  if (!e || isNull(e.value)) return undefined;
  const n = e.value;
  if (n.kind === "scalar") {
    if (typeof n.value === "boolean") return n.value;
    if (typeof n.value === "string" || typeof n.value === "number") {
      const t = String(n.value).trim().toLowerCase();
      if (yes.has(t)) return true;
      if (no.has(t)) return false;
    }
  }
  p.error(key, e.origin, `must be true or false, not ${kindName(n)}`);
  return undefined;
}

function int(p: Problems, key: string, e: CEntry | undefined): number | undefined {
  if (!e || isNull(e.value)) return undefined;
  const n = e.value;
  if (n.kind === "scalar") {
    if (typeof n.value === "number" && Number.isSafeInteger(n.value)) return n.value;
    if (typeof n.value === "string" && /^\s*\d+\s*$/.test(n.value)) return Number(n.value);
  }
  p.error(key, e.origin, `must be a whole number, not ${kindName(n)}`);
  return undefined;
}

function toJS(n: CNode): unknown {
  if (n.kind === "scalar") return n.value;
  if (n.kind === "seq") return n.items.map(toJS);
  return Object.fromEntries(n.entries.map((e) => [e.key, toJS(e.value)]));
}

function isUrl(text: string, schemes: readonly string[]): boolean {
  try {
    const u = new URL(text);
    return schemes.includes(u.protocol) && u.host !== "";
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// distribution's keys

/** The top-level sections of distribution's configuration (v2.x and v3). */
const topLevel = [
  "version",
  "log",
  "loglevel",
  "storage",
  "auth",
  "middleware",
  "reporting",
  "http",
  "notifications",
  "redis",
  "health",
  "proxy",
  "compatibility",
  "validation",
  "policy",
  "catalog",
] as const;

const ignoredTopLevel: Record<string, string> = {
  middleware: `${notUsed} (no registry, repository or storage middleware: no CloudFront or redirect middleware)`,
  reporting: `${notUsed} (no Bugsnag or New Relic reporting)`,
  notifications: `${notUsed} (no webhook notifications are sent)`,
  redis: `${notUsed} (no Redis cache)`,
  health: `${notUsed} (Capstan's own /healthz and /readyz answer instead of distribution's health checks)`,
  proxy: `${notUsed}: pull-through cache mode is not supported; this registry serves its own storage only`,
  validation: notUsed,
  policy: notUsed,
  catalog: `${notUsed} (the catalog's page size limit is Capstan's own)`,
};

const storageParams = ["cache", "maintenance", "delete", "redirect", "tag"] as const;
const supportedDrivers = ["filesystem", "s3"] as const;
const otherDrivers = ["azure", "gcs", "swift", "oss", "inmemory", "s3-aws", "cos"];

const s3Ignored: Record<string, string> = Object.fromEntries(
  [
    "encrypt",
    "keyid",
    "skipverify",
    "multipartcopychunksize",
    "multipartcopymaxconcurrency",
    "multipartcopythresholdsize",
    "storageclass",
    "objectacl",
    "useragent",
    "usedualstack",
    "accelerate",
    "loglevel",
    "sessiontoken",
  ].map((k) => [k, notUsed]),
);
s3Ignored.forcepathstyle = `${notUsed} (path-style addressing is used whenever regionendpoint is set)`;

const minChunk = 5 * 1024 * 1024;
const maxChunk = 5 * 1024 * 1024 * 1024;

const logLevels: Record<string, RegistryLogLevel> = {
  trace: "trace",
  debug: "debug",
  info: "info",
  warn: "warn",
  warning: "warn",
  error: "error",
  fatal: "fatal",
  panic: "fatal",
};

// ---------------------------------------------------------------------------------------------
// Environment overrides

/**
 * Apply REGISTRY_* variables to the tree, as distribution's configuration parser does. A value
 * that is not YAML is an error naming the variable.
 */
function applyEnv(p: Problems, root: Extract<CNode, { kind: "map" }>, env: Record<string, string | undefined>): void {
  const names = Object.keys(env)
    .filter((n) => n.startsWith(registryEnvPrefix) && env[n] !== undefined)
    .sort();
  for (const name of names) {
    const path = name.slice(registryEnvPrefix.length).split("_");
    const dotted = path.map((s) => s.toLowerCase()).join(".");
    if (path.some((s) => s === "")) {
      p.warn(dotted || "(none)", { env: name }, "ignoring the environment variable: its name has an empty level");
      continue;
    }
    if (!topLevel.some((t) => t.toUpperCase() === path[0]!.toUpperCase())) {
      p.warn(dotted, { env: name }, "ignoring an unrecognized environment variable: no such section in distribution's configuration");
      continue;
    }
    const value = envValue(p, dotted, name, env[name]!);
    if (value === undefined) continue;
    let node: Extract<CNode, { kind: "map" }> = root;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i]!;
      const last = i === path.length - 1;
      let entry = node.entries.find((e) => e.key.toUpperCase() === seg.toUpperCase());
      if (last) {
        if (entry) {
          entry.value = value;
          entry.origin = { env: name };
        } else node.entries.push({ key: seg.toLowerCase(), origin: { env: name }, value });
        break;
      }
      if (!entry || isNull(entry.value)) {
        const created: CNode = { kind: "map", origin: { env: name }, entries: [] };
        if (entry) {
          entry.value = created;
        } else {
          entry = { key: seg.toLowerCase(), origin: { env: name }, value: created };
          node.entries.push(entry);
        }
      }
      const next = entry.value;
      if (next.kind !== "map") {
        const at = path.slice(0, i + 1).map((s) => s.toLowerCase()).join(".");
        p.warn(dotted, { env: name }, `ignoring the environment variable: ${at} is ${kindName(next)}, not a map`);
        break;
      }
      node = next;
    }
  }
}

function envValue(p: Problems, key: string, name: string, payload: string): CNode | undefined {
  if (payload.trim() === "") return { kind: "scalar", origin: { env: name }, value: null, text: "" };
  const lc = new LineCounter();
  const doc = parseDocument(payload, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length > 0) {
    p.error(key, { env: name }, `the value is not YAML (${doc.errors[0]!.message.split("\n")[0]})`);
    return undefined;
  }
  return fromYaml(doc.contents, doc, lc, { env: name }, name);
}

// ---------------------------------------------------------------------------------------------
// The parser

export interface ParseOptions {
  /** Variables to apply (REGISTRY_* ones are read); default none. Pass process.env to run as distribution does. */
  env?: Record<string, string | undefined>;
}

/** Parse a config.yaml's text. Never throws for a bad file: errors are in the result. */
export function parseRegistryConfig(text: string, options: ParseOptions = {}): ConfigResult {
  const p = new Problems();
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  for (const e of doc.errors) {
    const pos = e.linePos?.[0] ?? lc.linePos(e.pos[0]);
    const dup = e.code === "DUPLICATE_KEY" ? keyPathAt(doc.contents, e.pos[0]) : undefined;
    const key = dup ?? (e.code === "DUPLICATE_KEY" ? "(duplicate key)" : "(YAML)");
    p.error(key, { line: pos.line, column: pos.col }, dup ? "the key appears twice in its map" : e.message.split("\n")[0]!);
  }
  if (p.errors.length > 0) return done(p);

  let root: CNode = fromYaml(doc.contents, doc, lc, { line: 1, column: 1 }, undefined);
  if (isNull(root)) root = { kind: "map", origin: { line: 1, column: 1 }, entries: [] };
  if (root.kind !== "map") {
    p.error("(top level)", root.origin, `the file must be a map of configuration sections (version, storage, http, ...), not ${kindName(root)}`);
    return done(p);
  }
  applyEnv(p, root, options.env ?? {});

  const top = new Map<string, CEntry>();
  for (const e of root.entries) {
    if ((topLevel as readonly string[]).includes(e.key)) {
      if (Object.hasOwn(ignoredTopLevel, e.key)) {
        if (!isNull(e.value)) p.warn(e.key, e.origin, ignoredTopLevel[e.key]!);
      } else top.set(e.key, e);
    } else {
      const near = topLevel.find((t) => t === e.key.toLowerCase());
      p.error(
        e.key,
        e.origin,
        near
          ? `keys are lower case: ${near}`
          : `not a section of distribution's configuration (version, log, storage, auth, http, notifications, redis, health, ...)`,
      );
    }
  }

  const version = checkVersion(p, top.get("version"));
  const log = checkLog(p, top.get("log"), top.get("loglevel"));
  const storage = checkStorage(p, top.get("storage"));
  const tokenAuth = checkAuth(p, top.get("auth"));
  const http = checkHttp(p, top.get("http"));
  checkCompatibility(p, top.get("compatibility"));

  if (p.errors.length > 0 || version === undefined || storage === undefined) return done(p);
  const config: RegistryConfig = {
    version,
    log,
    storage: storage.config,
    deleteEnabled: storage.deleteEnabled,
    ...(tokenAuth ? { tokenAuth } : {}),
    http,
  };
  return { ok: true, config, warnings: byLine(p.warnings) };
}

function done(p: Problems): ConfigResult {
  return { ok: false, errors: byLine(p.errors), warnings: byLine(p.warnings) };
}

/** File order (line, column), then the environment's, each group in the order found. */
function byLine(list: ConfigProblem[]): ConfigProblem[] {
  const rank = (x: ConfigProblem) => (x.line !== undefined ? x.line * 1e4 + (x.column ?? 0) : x.env !== undefined ? 1e12 : -1);
  return list
    .map((x, i) => [x, i] as const)
    .sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1])
    .map(([x]) => x);
}

/** The dotted path of the map key that starts at `offset` (a duplicate key the parser refused). */
function keyPathAt(node: unknown, offset: number, path: string[] = []): string | undefined {
  if (isMap(node)) {
    for (const pair of node.items) {
      const k = pair.key;
      const name = isScalar(k) ? String(k.value) : String(k);
      if (isScalar(k) && k.range?.[0] === offset) return [...path, name].join(".");
      const inner = keyPathAt(pair.value, offset, [...path, name]);
      if (inner) return inner;
    }
  } else if (isSeq(node)) {
    for (const [i, item] of node.items.entries()) {
      const inner = keyPathAt(item, offset, [...path, String(i)]);
      if (inner) return inner;
    }
  }
  return undefined;
}

function checkVersion(p: Problems, e: CEntry | undefined): string | undefined {
  if (!e) {
    p.error("version", { none: true }, 'missing: a distribution configuration starts with "version: 0.1"');
    return undefined;
  }
  const v = str(p, "version", e);
  if (v === undefined) {
    if (isNull(e.value)) p.error("version", e.origin, 'must be 0.1, the only version of the configuration format');
    return undefined;
  }
  if (v.trim() !== "0.1") {
    p.error("version", e.origin, `unsupported configuration version ${JSON.stringify(v)}: the format's only version is 0.1`);
    return undefined;
  }
  return "0.1";
}

function checkLog(p: Problems, e: CEntry | undefined, deprecated: CEntry | undefined): RegistryConfig["log"] {
  const out: RegistryConfig["log"] = { fields: {} };
  const level = (key: string, entry: CEntry | undefined): RegistryLogLevel | undefined => {
    const raw = str(p, key, entry);
    if (raw === undefined) return undefined;
    const l = logLevels[raw.trim().toLowerCase()];
    if (!l) p.error(key, entry!.origin, `${JSON.stringify(raw)} is not a log level (error, warn, info, debug)`);
    return l;
  };
  if (e) {
    const s = section(p, "log", e.value, {
      used: ["level", "fields"],
      ignored: {
        formatter: `${notUsed} (Capstan always logs JSON lines)`,
        hooks: `${notUsed} (no mail hooks)`,
        accesslog: `${notUsed} (no access log)`,
        reportcaller: notUsed,
      },
    });
    if (s) {
      const l = level("log.level", s.get("level"));
      if (l) out.level = l;
      const f = s.get("fields");
      if (f && !isNull(f.value)) {
        if (f.value.kind !== "map") p.error("log.fields", f.origin, `must be a map of field names to values, not ${kindName(f.value)}`);
        else out.fields = toJS(f.value) as Record<string, unknown>;
      }
    }
  }
  if (deprecated && !isNull(deprecated.value)) {
    p.warn("loglevel", deprecated.origin, "deprecated: use log.level");
    const l = level("loglevel", deprecated);
    if (l && out.level === undefined) out.level = l;
  }
  return out;
}

function checkStorage(p: Problems, e: CEntry | undefined): { config: StorageConfig; deleteEnabled: boolean } | undefined {
  if (!e) {
    p.error("storage", { none: true }, "missing: configure exactly one storage backend, storage.filesystem or storage.s3");
    return undefined;
  }
  const entries = entriesOf(p, "storage", e.value);
  if (!entries) return undefined;
  const drivers = entries.filter((x) => !(storageParams as readonly string[]).includes(x.key));
  let deleteEnabled = false;
  for (const x of entries) {
    const key = `storage.${x.key}`;
    switch (x.key) {
      case "delete": {
        const s = section(p, key, x.value, { used: ["enabled"] });
        deleteEnabled = bool(p, `${key}.enabled`, s?.get("enabled")) ?? false;
        break;
      }
      case "cache":
        for (const c of entriesOf(p, key, x.value) ?? []) {
          const known = ["blobdescriptor", "layerinfo", "blobdescriptorsize"].includes(c.key);
          p.warn(`${key}.${c.key}`, c.origin, known ? `${notUsed} (no blob descriptor cache: nothing goes stale after garbage collection)` : `not a key of distribution's configuration; ignored`);
        }
        break;
      case "maintenance":
        for (const c of entriesOf(p, key, x.value) ?? []) {
          const msg =
            c.key === "uploadpurging"
              ? `${notUsed} (Capstan's registry runs no upload purging of its own)`
              : c.key === "readonly"
                ? `${notUsed}: read-only mode is not supported; this registry accepts pushes`
                : `not a key of distribution's configuration; ignored`;
          if (c.value.kind !== "map" && !isNull(c.value)) p.error(`${key}.${c.key}`, c.origin, `must be a map of keys, not ${kindName(c.value)}`);
          else p.warn(`${key}.${c.key}`, c.origin, msg);
        }
        break;
      case "redirect":
        p.warn(key, x.origin, `${notUsed} (blobs are always served by the registry itself, never redirected)`);
        break;
      case "tag":
        p.warn(key, x.origin, notUsed);
        break;
    }
  }
  if (drivers.length === 0) {
    p.error("storage", e.origin, "no storage backend: configure exactly one of storage.filesystem or storage.s3");
    return undefined;
  }
  if (drivers.length > 1) {
    const where = drivers.map((d) => `storage.${d.key}${"line" in d.origin ? ` (line ${d.origin.line})` : "env" in d.origin ? ` (${d.origin.env})` : ""}`);
    const list = where.length === 2 ? `${where[0]} and ${where[1]}` : `${where.slice(0, -1).join(", ")} and ${where.at(-1)}`;
    p.error("storage", e.origin, `exactly one storage backend may be configured, found ${drivers.length}: ${list}`);
    return undefined;
  }
  const d = drivers[0]!;
  const key = `storage.${d.key}`;
  if (d.key === "filesystem") {
    const s = section(p, key, d.value, { used: ["rootdirectory"], ignored: { maxthreads: notUsed } });
    if (!s) return undefined;
    const root = str(p, `${key}.rootdirectory`, s.get("rootdirectory"), { nonEmpty: true });
    if (s.get("rootdirectory") && root === undefined) return undefined;
    return { config: { driver: "filesystem", rootDirectory: root ?? defaultRootDirectory }, deleteEnabled };
  }
  if (d.key === "s3") return checkS3(p, key, d, deleteEnabled);
  const known = otherDrivers.includes(d.key) ? `the ${d.key} storage driver is not supported by Capstan's registry` : `unknown storage driver "${d.key}"`;
  p.error(key, d.origin, `${known}: configure storage.${supportedDrivers.join(" or storage.")}`);
  return undefined;
}

function checkS3(p: Problems, key: string, d: CEntry, deleteEnabled: boolean): { config: S3StorageConfig; deleteEnabled: boolean } | undefined {
  const s = section(p, key, d.value, {
    used: ["accesskey", "secretkey", "region", "regionendpoint", "bucket", "secure", "v4auth", "chunksize", "rootdirectory"],
    ignored: s3Ignored,
  });
  if (!s) return undefined;
  const before = p.errors.length;
  const accessKey = str(p, `${key}.accesskey`, s.get("accesskey"));
  const secretKey = str(p, `${key}.secretkey`, s.get("secretkey"));
  const region = str(p, `${key}.region`, s.get("region"), { nonEmpty: true });
  const regionEndpoint = str(p, `${key}.regionendpoint`, s.get("regionendpoint"));
  const bucket = str(p, `${key}.bucket`, s.get("bucket"), { nonEmpty: true });
  const secure = bool(p, `${key}.secure`, s.get("secure"));
  const v4auth = bool(p, `${key}.v4auth`, s.get("v4auth"));
  const chunkSize = int(p, `${key}.chunksize`, s.get("chunksize"));
  const rootDirectory = str(p, `${key}.rootdirectory`, s.get("rootdirectory"));
  if (region === undefined && !s.get("region")) p.error(`${key}.region`, d.origin, "missing: the S3 driver needs a region (any name, e.g. us-east-1, for an S3-compatible endpoint)");
  if (bucket === undefined && !s.get("bucket")) p.error(`${key}.bucket`, d.origin, "missing: the S3 driver needs a bucket");
  if ((accessKey === undefined || accessKey === "") !== (secretKey === undefined || secretKey === "")) {
    const [has, lacks] = accessKey ? ["accesskey", "secretkey"] : ["secretkey", "accesskey"];
    p.error(`${key}.${lacks}`, s.get(has)!.origin, `missing: ${key}.${has} is given, and the two go together (or give neither, for the AWS SDK's default credentials)`);
  }
  if (regionEndpoint !== undefined && regionEndpoint !== "" && !isUrl(regionEndpoint, ["http:", "https:"])) {
    p.error(`${key}.regionendpoint`, s.get("regionendpoint")!.origin, `${JSON.stringify(regionEndpoint)} is not an http:// or https:// URL`);
  }
  if (chunkSize !== undefined && (chunkSize < minChunk || chunkSize > maxChunk)) {
    p.error(`${key}.chunksize`, s.get("chunksize")!.origin, `${chunkSize} is outside ${minChunk} (5 MiB) .. ${maxChunk} (5 GiB), the multipart part sizes S3 allows`);
  }
  if (p.errors.length > before || region === undefined || bucket === undefined) return undefined;
  const config: S3StorageConfig = {
    driver: "s3",
    region,
    bucket,
    secure: secure ?? true,
    v4auth: v4auth ?? true,
    ...(accessKey ? { accessKey } : {}),
    ...(secretKey ? { secretKey } : {}),
    ...(regionEndpoint ? { regionEndpoint } : {}),
    ...(chunkSize !== undefined ? { chunkSize } : {}),
    ...(rootDirectory ? { rootDirectory } : {}),
  };
  return { config, deleteEnabled };
}

function checkAuth(p: Problems, e: CEntry | undefined): TokenAuthConfig | undefined {
  if (!e) return undefined;
  const entries = entriesOf(p, "auth", e.value);
  if (!entries || entries.length === 0) return undefined;
  if (entries.length > 1) {
    p.error("auth", e.origin, `exactly one auth type may be configured, found ${entries.map((x) => `auth.${x.key}`).join(" and ")}`);
    return undefined;
  }
  const t = entries[0]!;
  if (t.key !== "token") {
    const what = ["htpasswd", "silly"].includes(t.key) ? `${t.key} auth is not supported by Capstan's registry` : `unknown auth type "${t.key}"`;
    p.error(`auth.${t.key}`, t.origin, `${what}: configure auth.token (the console is the authorization server), or no auth`);
    return undefined;
  }
  const s = section(p, "auth.token", t.value, {
    used: ["realm", "issuer", "service", "rootcertbundle"],
    ignored: { jwks: notUsed, signingalgorithms: notUsed, autoredirect: notUsed, autoredirectpath: notUsed },
  });
  if (!s) return undefined;
  const before = p.errors.length;
  const realm = str(p, "auth.token.realm", s.get("realm"), { nonEmpty: true });
  const issuer = str(p, "auth.token.issuer", s.get("issuer"), { nonEmpty: true });
  const service = str(p, "auth.token.service", s.get("service"), { nonEmpty: true });
  const bundle = str(p, "auth.token.rootcertbundle", s.get("rootcertbundle"), { nonEmpty: true });
  if (realm !== undefined && !isUrl(realm, ["http:", "https:"])) {
    p.error("auth.token.realm", s.get("realm")!.origin, `${JSON.stringify(realm)} is not an http:// or https:// URL (the authorization server's token endpoint)`);
  }
  if (bundle === undefined && !s.get("rootcertbundle")) {
    p.error("auth.token.rootcertbundle", t.origin, "missing: token auth needs the authorization server's certificate bundle (a PEM file)");
  }
  const given = { realm, issuer, service };
  const present = Object.entries(given).filter(([, v]) => v !== undefined).map(([k]) => k);
  const absent = Object.entries(given).filter(([k, v]) => v === undefined && !s.get(k)).map(([k]) => k);
  if (present.length > 0 && absent.length > 0) {
    p.error(
      `auth.token.${absent[0]}`,
      t.origin,
      `missing: auth.token has ${present.join(", ")} but not ${absent.join(", ")} (give all three, or none and let the store key /platform/config/auth/registry provide them)`,
    );
  }
  if (p.errors.length > before || bundle === undefined) return undefined;
  if (present.length === 0) {
    p.warn(
      "auth.token",
      t.origin,
      "no realm, issuer or service: token auth stays off unless the store key /platform/config/auth/registry provides them (capstan registry -store)",
    );
  }
  return { rootCertBundle: bundle, ...(realm ? { realm } : {}), ...(issuer ? { issuer } : {}), ...(service ? { service } : {}) };
}

function checkHttp(p: Problems, e: CEntry | undefined): RegistryConfig["http"] {
  const out: RegistryConfig["http"] = { headers: {} };
  if (!e) return out;
  const s = section(p, "http", e.value, {
    used: ["addr", "net", "host", "secret", "headers"],
    ignored: {
      prefix: `${notUsed}: the registry API is served at /v2/ on the listener`,
      relativeurls: `${notUsed} (Location headers are relative already)`,
      draintimeout: `${notUsed} (Capstan drains for its own grace period on SIGTERM)`,
      tls: `${notUsed}: serve HTTPS with -tls-cert and -tls-key`,
      debug: `${notUsed}: /metrics, /healthz and /readyz are served on the registry's own listener`,
      http2: notUsed,
      h2c: notUsed,
    },
  });
  if (!s) return out;
  const addr = str(p, "http.addr", s.get("addr"), { nonEmpty: true });
  if (addr !== undefined) {
    if (!/^(?:\[[^\]]+\]|[^:[\]]*):\d{1,5}$/.test(addr.trim()) || Number(addr.trim().split(":").at(-1)) > 65535) {
      p.error("http.addr", s.get("addr")!.origin, `${JSON.stringify(addr)} is not a listen address of the form [HOST]:PORT, e.g. :5000 or 127.0.0.1:5000`);
    } else out.addr = addr.trim();
  }
  const net = str(p, "http.net", s.get("net"));
  if (net !== undefined && net !== "" && net !== "tcp") p.error("http.net", s.get("net")!.origin, `${JSON.stringify(net)}: Capstan's registry listens on tcp only`);
  const host = str(p, "http.host", s.get("host"));
  if (host !== undefined && host !== "") {
    if (!isUrl(host, ["http:", "https:"])) p.error("http.host", s.get("host")!.origin, `${JSON.stringify(host)} is not an http:// or https:// URL`);
    else out.host = host;
  }
  const secret = str(p, "http.secret", s.get("secret"));
  if (secret) out.secret = secret;
  const h = s.get("headers");
  if (h && !isNull(h.value)) {
    const entries = entriesOf(p, "http.headers", h.value) ?? [];
    for (const x of entries) {
      const key = `http.headers.${x.key}`;
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(x.key)) {
        p.error(key, x.origin, "not a valid HTTP header name");
        continue;
      }
      const values = x.value.kind === "seq" ? x.value.items : [x.value];
      const texts: string[] = [];
      for (const v of values) {
        if (v.kind !== "scalar" || v.value === null) p.error(key, x.origin, `must be a list of strings, e.g. [nosniff], not ${kindName(v)}`);
        else if (/[\r\n]/.test(v.text)) p.error(key, x.origin, "a header value must not contain a line break");
        else texts.push(v.text);
      }
      if (texts.length > 0) out.headers[x.key] = texts;
    }
  }
  return out;
}

function checkCompatibility(p: Problems, e: CEntry | undefined): void {
  if (!e) return;
  const s = section(p, "compatibility", e.value, { used: ["schema1"] });
  const schema1 = s?.get("schema1");
  if (!schema1) return;
  const inner = section(p, "compatibility.schema1", schema1.value, {
    used: ["disablesignaturestore"],
    ignored: {
      signingkeyfile: `${notUsed} (schema1 manifests are not signed or served)`,
      enabled: `${notUsed} (schema1 manifests are not accepted)`,
    },
  });
  // The original platform's key: Capstan stores no schema1 signatures, so either value is fine.
  bool(p, "compatibility.schema1.disablesignaturestore", inner?.get("disablesignaturestore"));
}
