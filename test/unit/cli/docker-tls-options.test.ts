import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerTlsFromOptions, dockerTlsOptionDefs } from "../../../cli/docker-tls-options.ts";
import { parseArgs, UsageError } from "../../../cli/options.ts";

let dir: string;
const pem = (what: string) => `-----BEGIN ${what}-----\nAAAA\n-----END ${what}-----\n`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-tls-opts-"));
  await writeFile(join(dir, "ca.pem"), pem("CERTIFICATE"));
  await writeFile(join(dir, "cert.pem"), pem("CERTIFICATE"));
  await writeFile(join(dir, "key.pem"), pem("PRIVATE KEY"));
  await writeFile(join(dir, "notpem.txt"), "hello\n");
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const parse = (argv: string[], env: Record<string, string> = {}) => parseArgs(argv, dockerTlsOptionDefs, env).options;

describe("-docker-tls-* options", () => {
  it("are three string options read from CAPSTAN_DOCKER_TLS_*", () => {
    expect(dockerTlsOptionDefs.map((d) => [d.name, d.type])).toEqual([
      ["docker-tls-ca", "string"],
      ["docker-tls-cert", "string"],
      ["docker-tls-key", "string"],
    ]);
    const o = parse(["-docker-tls-ca", "a"], { CAPSTAN_DOCKER_TLS_CERT: "b", CAPSTAN_DOCKER_TLS_KEY: "c" });
    expect(o).toEqual({ "docker-tls-ca": "a", "docker-tls-cert": "b", "docker-tls-key": "c" });
  });

  it("answers undefined when none is given", () => {
    expect(dockerTlsFromOptions(parse([]))).toBeUndefined();
  });

  it("reads the three files' contents", () => {
    const o = parse(["-docker-tls-ca", join(dir, "ca.pem"), "--docker-tls-cert", join(dir, "cert.pem"), `-docker-tls-key=${join(dir, "key.pem")}`]);
    expect(dockerTlsFromOptions(o)).toEqual({ ca: pem("CERTIFICATE"), cert: pem("CERTIFICATE"), key: pem("PRIVATE KEY") });
  });

  it("requires all three, naming the missing ones", () => {
    const o = parse(["-docker-tls-ca", join(dir, "ca.pem"), "-docker-tls-cert", join(dir, "cert.pem")]);
    expect(() => dockerTlsFromOptions(o)).toThrow(UsageError);
    expect(() => dockerTlsFromOptions(o)).toThrow(/^-docker-tls-key is missing: .*needs all of/);
    expect(() => dockerTlsFromOptions(parse(["-docker-tls-cert", "x"]))).toThrow(/^-docker-tls-ca, -docker-tls-key are missing/);
  });

  it("names the option and the path of a file it cannot use", () => {
    const missing = join(dir, "absent.pem");
    const o = parse(["-docker-tls-ca", join(dir, "ca.pem"), "-docker-tls-cert", missing, "-docker-tls-key", join(dir, "key.pem")]);
    expect(() => dockerTlsFromOptions(o)).toThrow(UsageError);
    expect(() => dockerTlsFromOptions(o)).toThrow(`-docker-tls-cert ${missing}: cannot read the file (ENOENT)`);
    const notPem = join(dir, "notpem.txt");
    const o2 = parse(["-docker-tls-ca", join(dir, "ca.pem"), "-docker-tls-cert", join(dir, "cert.pem"), "-docker-tls-key", notPem]);
    expect(() => dockerTlsFromOptions(o2)).toThrow(`-docker-tls-key ${notPem}: not a PEM file`);
  });
});
