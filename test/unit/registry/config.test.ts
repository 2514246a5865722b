// distribution's config.yaml as `capstan registry` reads it (api/registry/config.ts): the original
// platform's file unchanged (fixtures/lain-registry-config.yml, laincloud/registry config.yml
// verbatim), one storage backend, unknown keys warned by name, REGISTRY_* overrides, errors naming
// key and line, and `capstan registry check-config` exit codes through the CLI.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { formatProblem, parseRegistryConfig, type ConfigProblem, type ConfigResult, type RegistryConfig } from "../../../api/registry/config.ts";
import { main } from "../../../cli/main.ts";

const fixture = fileURLToPath(new URL("./fixtures/lain-registry-config.yml", import.meta.url));
const original = readFileSync(fixture, "utf8");

function ok(r: ConfigResult): RegistryConfig {
  if (!r.ok) throw new Error(`expected a valid config, got:\n${r.errors.map((e) => formatProblem(e)).join("\n")}`);
  return r.config;
}

function errors(r: ConfigResult): ConfigProblem[] {
  if (r.ok) throw new Error("expected errors, the config is valid");
  return r.errors;
}

const brief = (ps: ConfigProblem[]) => ps.map((p) => ({ key: p.key, line: p.line, env: p.env }));

describe("the original platform's config.yml", () => {
  it("parses unchanged, with only what Capstan does not use warned about", () => {
    const r = parseRegistryConfig(original);
    expect(ok(r)).toEqual({
      version: "0.1",
      log: { level: "info", fields: { service: "registry", environment: "development" } },
      storage: { driver: "filesystem", rootDirectory: "/var/lib/registry" },
      deleteEnabled: true,
      tokenAuth: {
        realm: "https://console.domain/api/v1/authorize/registry/",
        issuer: "auth server",
        service: "lain.local",
        rootCertBundle: "/lain/app/auth/server.pem",
      },
      http: { addr: ":5000", secret: "asecretforlocaldevelopment", headers: {} },
    });
    expect(brief(r.warnings)).toEqual([
      { key: "storage.cache.layerinfo", line: 9, env: undefined },
      { key: "storage.maintenance.uploadpurging", line: 13, env: undefined },
    ]);
  });

  it("takes entry.sh's overrides: REGISTRY_AUTH_TOKEN_* from the auth key, or REGISTRY_AUTH= to turn auth off", () => {
    const on = ok(
      parseRegistryConfig(original, {
        env: {
          REGISTRY_AUTH_TOKEN_REALM: "http://console.example.com/api/v1/authorize/registry/",
          REGISTRY_AUTH_TOKEN_ISSUER: "auth server",
          REGISTRY_AUTH_TOKEN_SERVICE: "example.com",
        },
      }),
    );
    expect(on.tokenAuth).toEqual({
      realm: "http://console.example.com/api/v1/authorize/registry/",
      issuer: "auth server",
      service: "example.com",
      rootCertBundle: "/lain/app/auth/server.pem",
    });
    const off = ok(parseRegistryConfig(original, { env: { REGISTRY_AUTH: "" } }));
    expect(off.tokenAuth).toBeUndefined();
    expect(off.storage).toEqual({ driver: "filesystem", rootDirectory: "/var/lib/registry" });
  });
});

describe("storage", () => {
  it("refuses two backends, naming both with their lines", () => {
    const text = "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /r\n  s3:\n    bucket: b\n    region: r\n";
    const [e, ...rest] = errors(parseRegistryConfig(text));
    expect(rest).toEqual([]);
    expect(e).toMatchObject({ key: "storage", line: 2 });
    expect(formatProblem(e!, "c.yaml")).toBe(
      "c.yaml:2: storage: exactly one storage backend may be configured, found 2: storage.filesystem (line 3) and storage.s3 (line 5)",
    );
  });

  it("refuses no backend, and a backend Capstan cannot run", () => {
    expect(brief(errors(parseRegistryConfig("version: 0.1\nstorage:\n  delete:\n    enabled: true\n")))).toEqual([{ key: "storage", line: 2, env: undefined }]);
    expect(errors(parseRegistryConfig("version: 0.1\n")).map((e) => formatProblem(e))).toEqual([
      "config.yaml: storage: missing: configure exactly one storage backend, storage.filesystem or storage.s3",
    ]);
    const [azure] = errors(parseRegistryConfig("version: 0.1\nstorage:\n  azure:\n    accountname: a\n"));
    expect(formatProblem(azure!)).toBe("config.yaml:3: storage.azure: the azure storage driver is not supported by Capstan's registry: configure storage.filesystem or storage.s3");
  });

  it("reads every s3 key, with distribution's loose booleans and integers", () => {
    const text = [
      "version: 0.1",
      "storage:",
      "  s3:",
      "    accesskey: AKID",
      "    secretkey: SECRET",
      "    region: us-east-1",
      "    regionendpoint: http://127.0.0.1:9000",
      "    bucket: images",
      '    secure: "false"',
      "    v4auth: yes",
      '    chunksize: "10485760"',
      "    rootdirectory: /registry",
      "    storageclass: STANDARD",
      "",
    ].join("\n");
    const r = parseRegistryConfig(text);
    expect(ok(r).storage).toEqual({
      driver: "s3",
      accessKey: "AKID",
      secretKey: "SECRET",
      region: "us-east-1",
      regionEndpoint: "http://127.0.0.1:9000",
      bucket: "images",
      secure: false,
      v4auth: true,
      chunkSize: 10485760,
      rootDirectory: "/registry",
    });
    expect(brief(r.warnings)).toEqual([{ key: "storage.s3.storageclass", line: 13, env: undefined }]);
    expect(ok(parseRegistryConfig("version: 0.1\nstorage:\n  s3: {bucket: b, region: r}\n")).storage).toEqual({ driver: "s3", bucket: "b", region: "r", secure: true, v4auth: true });
  });

  it("names the missing and wrong s3 keys with their lines, never echoing the secret key", () => {
    const text = "version: 0.1\nstorage:\n  s3:\n    secretkey: [hunter2]\n    chunksize: 1024\n    secure: maybe\n";
    const es = errors(parseRegistryConfig(text));
    expect(es.map((e) => formatProblem(e))).toEqual([
      "config.yaml:3: storage.s3.region: missing: the S3 driver needs a region (any name, e.g. us-east-1, for an S3-compatible endpoint)",
      "config.yaml:3: storage.s3.bucket: missing: the S3 driver needs a bucket",
      "config.yaml:4: storage.s3.secretkey: must be a string, not a list",
      "config.yaml:5: storage.s3.chunksize: 1024 is outside 5242880 (5 MiB) .. 5368709120 (5 GiB), the multipart part sizes S3 allows",
      'config.yaml:6: storage.s3.secure: must be true or false, not "maybe"',
    ]);
    expect(JSON.stringify(es)).not.toContain("hunter2");
  });

  it("defaults rootdirectory as distribution does, and reads delete.enabled", () => {
    const c = ok(parseRegistryConfig("version: 0.1\nstorage:\n  filesystem:\n"));
    expect(c.storage).toEqual({ driver: "filesystem", rootDirectory: "/var/lib/registry" });
    expect(c.deleteEnabled).toBe(false);
    const [e] = errors(parseRegistryConfig("version: 0.1\nstorage:\n  filesystem: {}\n  delete:\n    enabled: maybe\n"));
    expect(formatProblem(e!)).toBe('config.yaml:5: storage.delete.enabled: must be true or false, not "maybe"');
  });
});

describe("keys Capstan does not use", () => {
  it("are warnings naming each key and its line; the config stays valid", () => {
    const text = [
      "version: 0.1", //                                    1
      "storage:", //                                        2
      "  filesystem:", //                                   3
      "    rootdirectory: /r", //                           4
      "    maxthreads: 100", //                             5
      "    RootDir: /x", //                                 6
      "  redirect:", //                                     7
      "    disable: true", //                               8
      "http:", //                                           9
      "  addr: 127.0.0.1:5000", //                         10
      "  host: https://registry.example.com", //          11
      "  headers:", //                                     12
      "    X-Content-Type-Options: [nosniff]", //          13
      "  tls:", //                                         14
      "    certificate: /c.pem", //                        15
      "notifications:", //                                 16
      "  endpoints: []", //                                17
      "redis:", //                                         18
      "  addr: localhost:6379", //                         19
      "health:", //                                        20
      "  storagedriver:", //                               21
      "    enabled: true", //                              22
      "log:", //                                           23
      "  formatter: text", //                              24
      "",
    ].join("\n");
    const r = parseRegistryConfig(text);
    const c = ok(r);
    expect(c.http).toEqual({ addr: "127.0.0.1:5000", host: "https://registry.example.com", headers: { "X-Content-Type-Options": ["nosniff"] } });
    expect(brief(r.warnings).map((w) => `${w.line} ${w.key}`)).toEqual([
      "5 storage.filesystem.maxthreads",
      "6 storage.filesystem.RootDir",
      "7 storage.redirect",
      "14 http.tls",
      "16 notifications",
      "18 redis",
      "20 health",
      "24 log.formatter",
    ]);
    expect(r.warnings.find((w) => w.key === "http.tls")!.message).toContain("-tls-cert and -tls-key");
  });

  it("but a top-level key that is no section of the configuration is an error", () => {
    const es = errors(parseRegistryConfig("version: 0.1\nstorage:\n  filesystem: {}\nstroage:\n  s3: {}\nHTTP:\n  addr: :5000\n"));
    expect(es.map((e) => formatProblem(e))).toEqual([
      "config.yaml:4: stroage: not a section of distribution's configuration (version, log, storage, auth, http, notifications, redis, health, ...)",
      "config.yaml:6: HTTP: keys are lower case: http",
    ]);
  });
});

describe("auth", () => {
  it("needs realm, issuer and service together, and the certificate bundle", () => {
    const es = errors(parseRegistryConfig("version: 0.1\nstorage: {filesystem: {}}\nauth:\n  token:\n    realm: https://console/api/v1/authorize/registry/\n"));
    expect(brief(es)).toEqual([
      { key: "auth.token.rootcertbundle", line: 4, env: undefined },
      { key: "auth.token.issuer", line: 4, env: undefined },
    ]);
    expect(es[1]!.message).toContain("has realm but not issuer, service");
  });

  it("takes a bundle alone (realm, issuer and service then come from the store key), with a warning", () => {
    const r = parseRegistryConfig("version: 0.1\nstorage: {filesystem: {}}\nauth:\n  token:\n    rootcertbundle: /etc/registry/cert.pem\n");
    expect(ok(r).tokenAuth).toEqual({ rootCertBundle: "/etc/registry/cert.pem" });
    expect(brief(r.warnings)).toEqual([{ key: "auth.token", line: 4, env: undefined }]);
  });

  it("refuses an auth type it cannot run rather than serving without auth", () => {
    const [e] = errors(parseRegistryConfig("version: 0.1\nstorage: {filesystem: {}}\nauth:\n  htpasswd:\n    realm: basic\n    path: /etc/htpasswd\n"));
    expect(formatProblem(e!)).toBe("config.yaml:4: auth.htpasswd: htpasswd auth is not supported by Capstan's registry: configure auth.token (the console is the authorization server), or no auth");
  });
});

describe("REGISTRY_* environment variables", () => {
  const base = "version: 0.1\nstorage:\n  filesystem:\n    RootDirectory: /ignored\n    rootdirectory: /from-file\nhttp:\n  addr: :5000\n";

  it("override keys by their upper-case path, values read as YAML", () => {
    const r = parseRegistryConfig(base, {
      env: {
        REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY: "/from-env",
        REGISTRY_HTTP_ADDR: "127.0.0.1:5001",
        REGISTRY_STORAGE_DELETE_ENABLED: "true",
        REGISTRY_LOG_LEVEL: "debug",
        REGISTRY_AUTH_TOKEN_ROOTCERTBUNDLE: "/cert.pem",
        REGISTRY_AUTH_TOKEN_REALM: "https://console.example.com/api/v1/authorize/registry/",
        REGISTRY_AUTH_TOKEN_ISSUER: "auth server",
        REGISTRY_AUTH_TOKEN_SERVICE: "example.com",
        HOME: "/root",
      },
    });
    const c = ok(r);
    // The first key that matches case-insensitively is the one replaced, as distribution's parser does.
    expect(c.storage).toEqual({ driver: "filesystem", rootDirectory: "/from-file" });
    expect(c.http.addr).toBe("127.0.0.1:5001");
    expect(c.deleteEnabled).toBe(true);
    expect(c.log.level).toBe("debug");
    expect(c.tokenAuth).toEqual({ realm: "https://console.example.com/api/v1/authorize/registry/", issuer: "auth server", service: "example.com", rootCertBundle: "/cert.pem" });
    const plain = ok(parseRegistryConfig("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /from-file\n", { env: { REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY: "/from-env" } }));
    expect(plain.storage).toEqual({ driver: "filesystem", rootDirectory: "/from-env" });
  });

  it("apply a parent before its children, so a cleared section can be rebuilt", () => {
    const c = ok(
      parseRegistryConfig(original, {
        env: { REGISTRY_STORAGE: "", REGISTRY_STORAGE_S3_BUCKET: "images", REGISTRY_STORAGE_S3_REGION: "eu-west-1" },
      }),
    );
    expect(c.storage).toEqual({ driver: "s3", bucket: "images", region: "eu-west-1", secure: true, v4auth: true });
    expect(c.deleteEnabled).toBe(false);
  });

  it("name the variable in an error, and warn about variables that are no configuration", () => {
    const r = parseRegistryConfig(base, { env: { REGISTRY_STORAGE_DELETE_ENABLED: "maybe", REGISTRY_PORT: "tcp://10.0.0.1:5000", REGISTRY_SERVICE_HOST: "10.0.0.1" } });
    expect(errors(r).map((e) => formatProblem(e, "r.yaml"))).toEqual([
      'r.yaml: storage.delete.enabled (from REGISTRY_STORAGE_DELETE_ENABLED): must be true or false, not "maybe"',
    ]);
    expect(brief(r.warnings).filter((w) => w.env)).toEqual([
      { key: "port", line: undefined, env: "REGISTRY_PORT" },
      { key: "service.host", line: undefined, env: "REGISTRY_SERVICE_HOST" },
    ]);
  });

  it("a new storage backend from the environment is still one backend too many", () => {
    const [e] = errors(parseRegistryConfig(base, { env: { REGISTRY_STORAGE_S3_BUCKET: "b" } }));
    expect(e!.message).toBe("exactly one storage backend may be configured, found 2: storage.filesystem (line 3) and storage.s3 (REGISTRY_STORAGE_S3_BUCKET)");
  });
});

describe("errors name the key and the line", () => {
  it.each([
    ["version: 0.2\nstorage: {filesystem: {}}\n", 'config.yaml:1: version: unsupported configuration version "0.2": the format\'s only version is 0.1'],
    ["storage: {filesystem: {}}\n", 'config.yaml: version: missing: a distribution configuration starts with "version: 0.1"'],
    ["version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /a\n    rootdirectory: /b\n", "config.yaml:5: storage.filesystem.rootdirectory: the key appears twice in its map"],
    ["version: 0.1\nstorage:\n  filesystem: [a]\n", "config.yaml:3: storage.filesystem: must be a map of keys, not a list"],
    ["version: 0.1\nstorage: {filesystem: {}}\nhttp:\n  addr: 5000\n", 'config.yaml:4: http.addr: "5000" is not a listen address of the form [HOST]:PORT, e.g. :5000 or 127.0.0.1:5000'],
    ["version: 0.1\nstorage: {filesystem: {}}\nlog:\n  level: loud\n", 'config.yaml:4: log.level: "loud" is not a log level (error, warn, info, debug)'],
    ["version: 0.1\nstorage: {filesystem: {}}\nauth:\n  token:\n    realm: console\n    issuer: i\n    service: s\n    rootcertbundle: /c\n", 'config.yaml:5: auth.token.realm: "console" is not an http:// or https:// URL (the authorization server\'s token endpoint)'],
    ["- version\n", "config.yaml:1: (top level): the file must be a map of configuration sections (version, storage, http, ...), not a list"],
  ])("%j", (text, message) => {
    expect(errors(parseRegistryConfig(text)).map((e) => formatProblem(e))).toEqual([message]);
  });

  it("a YAML syntax error names its line", () => {
    const [e] = errors(parseRegistryConfig("version: 0.1\nstorage:\n  filesystem: {rootdirectory: /r\nhttp: {}\n"));
    expect(e!.line).toBeGreaterThanOrEqual(3);
    expect(e!.key).toBe("(YAML)");
  });
});

describe("capstan registry check-config", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-regcfg-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = "";
    let err = "";
    vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
    vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
    try {
      const code = await main(argv);
      return { code, out, err };
    } finally {
      vi.restoreAllMocks();
    }
  }

  it("exits 0 for the original config, printing its warnings", async () => {
    const r = await cli(["registry", "check-config", fixture]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      `${fixture}: valid: storage filesystem /var/lib/registry, delete enabled, token auth (realm https://console.domain/api/v1/authorize/registry/, service lain.local), listen :5000 (2 warnings)\n`,
    );
    expect(r.err).toContain(`warning: ${fixture}:9: storage.cache.layerinfo: not used by Capstan's registry; ignored`);
    expect(r.err).toContain(`warning: ${fixture}:13: storage.maintenance.uploadpurging:`);
    // The bundle is not on this machine: said, not fatal (it is checked when the registry starts).
    expect(r.err).toContain("auth.token.rootcertbundle: /lain/app/auth/server.pem: cannot read the file (ENOENT)");
  });

  it("exits 2 for an invalid config, each error naming key and line", async () => {
    const file = join(dir, "both.yaml");
    writeFileSync(file, "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /r\n  s3:\n    bucket: b\n    region: r\n  delete:\n    enabled: perhaps\n");
    const r = await cli(["registry", "check-config", file]);
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err).toBe(
      `error: ${file}:2: storage: exactly one storage backend may be configured, found 2: storage.filesystem (line 3) and storage.s3 (line 5)\n` +
        `error: ${file}:9: storage.delete.enabled: must be true or false, not "perhaps"\n` +
        `${file}: invalid (2 errors)\n`,
    );
  });

  it("applies REGISTRY_* variables as the registry would", async () => {
    vi.stubEnv("REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY", "/srv/registry");
    vi.stubEnv("REGISTRY_AUTH", "");
    const r = await cli(["registry", "check-config", fixture]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("storage filesystem /srv/registry, delete enabled, no auth, listen :5000");
  });

  it("exits 2 for a missing file or argument", async () => {
    const missing = await cli(["registry", "check-config", join(dir, "nope.yaml")]);
    expect(missing.code).toBe(2);
    expect(missing.err).toBe(`capstan registry check-config: ${join(dir, "nope.yaml")}: cannot read the config file (ENOENT)\n`);
    const none = await cli(["registry", "check-config"]);
    expect(none.code).toBe(2);
    expect(none.err).toContain("check-config needs the config file");
    const noConfig = await cli(["registry"]);
    expect(noConfig.code).toBe(2);
    expect(noConfig.err).toContain("-config FILE is required");
  });
});
