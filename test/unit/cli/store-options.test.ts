import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseArgs, UsageError } from "../../../cli/options.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../../../cli/store-options.ts";
import { storeOption } from "../../../cli/serve.ts";
import { makePki, type IssuedCert, type Pki } from "../../helpers/certs.ts";

let dir: string;
let pki: Pki;
let other: Pki;
let client: IssuedCert;
let otherClient: IssuedCert;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-store-opts-"));
  pki = await makePki();
  other = await makePki("other-ca");
  client = await pki.issue("client", { client: true });
  otherClient = await other.issue("client", { client: true });
  await writeFile(join(dir, "notpem.txt"), "hello\n");
  await writeFile(join(dir, "garbage-cert.pem"), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  await writeFile(join(dir, "password"), "s3cret-pw\n");
  await writeFile(join(dir, "password-crlf"), "s3cret-pw\r\n");
  await writeFile(join(dir, "empty"), "\n");
});

afterAll(async () => {
  await Promise.all([rm(dir, { recursive: true, force: true }), pki?.remove(), other?.remove()]);
});

// -store without its default (as `capstan up` has it): most cases here give no store URL.
const defs = [{ ...storeOption, default: undefined }, ...storeConnectionOptionDefs];
const parse = (argv: string[], env: Record<string, string> = {}) => parseArgs(argv, defs, env).options;
const connect = (argv: string[], env: Record<string, string> = {}) => storeConnectionFromOptions(parse(argv, env), env);

function usageError(fn: () => unknown): UsageError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return e as UsageError;
  }
  throw new Error("expected a UsageError");
}

describe("-store-* connection options", () => {
  it("are five string options, each read from its CAPSTAN_STORE_* variable", () => {
    expect(storeConnectionOptionDefs.map((d) => [d.name, d.type])).toEqual([
      ["store-ca", "string"],
      ["store-cert", "string"],
      ["store-key", "string"],
      ["store-user", "string"],
      ["store-password-file", "string"],
    ]);
    const o = parse([], {
      CAPSTAN_STORE_CA: "a",
      CAPSTAN_STORE_CERT: "b",
      CAPSTAN_STORE_KEY: "c",
      CAPSTAN_STORE_USER: "d",
      CAPSTAN_STORE_PASSWORD_FILE: "e",
    });
    expect(o).toMatchObject({ "store-ca": "a", "store-cert": "b", "store-key": "c", "store-user": "d", "store-password-file": "e" });
  });

  it("has no command-line option that takes the password itself", () => {
    expect(() => parse(["-store-password", "x"])).toThrow(/unknown option -store-password/);
  });

  it("answers an empty connection when nothing is given", () => {
    expect(connect([])).toEqual({});
    expect(connect(["-store", "etcds://127.0.0.1:2379"])).toEqual({});
  });

  it("reads the CA alone (server verification only)", () => {
    const c = connect(["-store", "etcds://127.0.0.1:2379", "-store-ca", pki.ca]);
    expect(c.tls?.ca).toContain("-----BEGIN CERTIFICATE-----");
    expect(c.tls?.cert).toBeUndefined();
    expect(c.auth).toBeUndefined();
  });

  it("reads the client certificate and key, with or without a CA, also from the environment", () => {
    const c = connect(["-store", "etcds://127.0.0.1:2379", "-store-cert", client.cert, "-store-key", client.key]);
    expect(c.tls?.ca).toBeUndefined();
    expect(c.tls?.cert).toContain("-----BEGIN CERTIFICATE-----");
    expect(c.tls?.key).toContain("PRIVATE KEY-----");
    const fromEnv = connect(["-store", "etcds://127.0.0.1:2379"], { CAPSTAN_STORE_CA: pki.ca, CAPSTAN_STORE_CERT: client.cert, CAPSTAN_STORE_KEY: client.key });
    expect(Object.keys(fromEnv.tls ?? {}).sort()).toEqual(["ca", "cert", "key"]);
  });

  it("refuses a certificate without its key and the reverse, naming both options", () => {
    const e1 = usageError(() => connect(["-store-cert", client.cert]));
    expect(e1.message).toMatch(/^-store-cert is given without -store-key/);
    expect(e1.message).toContain("CAPSTAN_STORE_KEY");
    const e2 = usageError(() => connect(["-store-key", client.key]));
    expect(e2.message).toMatch(/^-store-key is given without -store-cert/);
  });

  it("names the option and the path of a missing, non-PEM or unusable file", () => {
    const missing = join(dir, "nope.pem");
    expect(usageError(() => connect(["-store-ca", missing])).message).toBe(`-store-ca ${missing}: cannot read the file (ENOENT)`);
    const notPem = join(dir, "notpem.txt");
    expect(usageError(() => connect(["-store-ca", notPem])).message).toBe(`-store-ca ${notPem}: not a PEM file (no "-----BEGIN" line)`);
    expect(usageError(() => connect(["-store-cert", notPem, "-store-key", client.key])).message).toMatch(/^-store-cert .*notpem\.txt: not a PEM file/);
    const garbage = join(dir, "garbage-cert.pem");
    expect(usageError(() => connect(["-store-ca", garbage])).message).toMatch(/^-store-ca .*garbage-cert\.pem: not a usable CA certificate/);
    // A key given as the CA is PEM, but no certificate.
    expect(usageError(() => connect(["-store-ca", client.key])).message).toMatch(/^-store-ca .*: not a usable CA certificate/);
  });

  it("refuses a certificate with another certificate's key", () => {
    const e = usageError(() => connect(["-store-cert", client.cert, "-store-key", otherClient.key]));
    expect(e.message).toContain(`-store-cert ${client.cert}, -store-key ${otherClient.key}: not a usable certificate and private key pair`);
  });

  it("refuses TLS material for a store URL that is not etcds://, naming the options", () => {
    const e = usageError(() => connect(["-store", "etcd://127.0.0.1:2379", "-store-ca", pki.ca]));
    expect(e.message).toMatch(/^-store-ca: TLS to the store needs an etcds:\/\/ store URL, not etcd:\/\//);
    const e2 = usageError(() => connect(["-store", "sqlite://x.db", "-store-cert", client.cert, "-store-key", client.key]));
    expect(e2.message).toMatch(/^-store-cert, -store-key: TLS to the store needs an etcds:\/\/ store URL, not sqlite:\/\//);
  });

  it("reads the password from -store-password-file, dropping the trailing newline", () => {
    for (const file of ["password", "password-crlf"]) {
      const c = connect(["-store", "etcd://127.0.0.1:2379", "-store-user", "capstan", "-store-password-file", join(dir, file)]);
      expect(c.auth?.username).toBe("capstan");
      expect(c.auth?.password).toBe("s3cret-pw");
    }
  });

  it("reads the password from CAPSTAN_STORE_PASSWORD", () => {
    const c = connect(["-store", "etcds://127.0.0.1:2379", "-store-user", "capstan"], { CAPSTAN_STORE_PASSWORD: "from-env" });
    expect(c.auth?.password).toBe("from-env");
  });

  it("keeps the password out of JSON, util.inspect and object spreads", () => {
    const c = connect(["-store-user", "capstan"], { CAPSTAN_STORE_PASSWORD: "do-not-print-me" });
    expect(JSON.stringify(c)).not.toContain("do-not-print-me");
    expect(inspect(c, { depth: 5 })).not.toContain("do-not-print-me");
    expect(JSON.stringify({ ...c.auth })).not.toContain("do-not-print-me");
    expect(c.auth?.password).toBe("do-not-print-me");
  });

  it("refuses a user without a password, a password without a user, and two passwords", () => {
    expect(usageError(() => connect(["-store-user", "capstan"])).message).toBe(
      "-store-user capstan needs a password: give -store-password-file FILE or set CAPSTAN_STORE_PASSWORD",
    );
    expect(usageError(() => connect(["-store-password-file", join(dir, "password")])).message).toMatch(/^-store-password-file is given without -store-user/);
    expect(usageError(() => connect([], { CAPSTAN_STORE_PASSWORD: "x" })).message).toMatch(/^CAPSTAN_STORE_PASSWORD is set but -store-user is not/);
    expect(
      usageError(() => connect(["-store-user", "u", "-store-password-file", join(dir, "password")], { CAPSTAN_STORE_PASSWORD: "x" })).message,
    ).toMatch(/^-store-password-file and CAPSTAN_STORE_PASSWORD are both given/);
  });

  it("refuses an empty or unreadable password file, naming the option and the path, never the content", () => {
    const empty = join(dir, "empty");
    expect(usageError(() => connect(["-store-user", "u", "-store-password-file", empty])).message).toBe(`-store-password-file ${empty}: the file is empty`);
    const missing = join(dir, "no-password");
    expect(usageError(() => connect(["-store-user", "u", "-store-password-file", missing])).message).toBe(
      `-store-password-file ${missing}: cannot read the file (ENOENT)`,
    );
  });

  it("refuses a user for a store that is not etcd", () => {
    const e = usageError(() => connect(["-store", "sqlite://x.db", "-store-user", "u"], { CAPSTAN_STORE_PASSWORD: "x" }));
    expect(e.message).toMatch(/^-store-user: an etcd user applies only to an etcd:\/\/ or etcds:\/\/ store, not sqlite:\/\//);
  });
});
