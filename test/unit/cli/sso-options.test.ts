// The console's single sign-on options (cli/sso-options.ts, docs/console.md#single-sign-on): off
// without -oidc-issuer, plain http issuers on loopback only, the secret from a file or
// CAPSTAN_OIDC_CLIENT_SECRET (never an option), admins as e-mails, the token lifetime's bounds.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseArgs, UsageError } from "../../../cli/options.ts";
import { ssoOptionDefs, ssoOptionsOf, ssoSettings } from "../../../cli/sso-options.ts";

let dir: string;
let secretFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-sso-options-"));
  secretFile = join(dir, "secret");
  await writeFile(secretFile, "  the-secret\n", { mode: 0o600 });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const settings = (argv: string[], env: Record<string, string | undefined> = {}) => ssoSettings(parseArgs(argv, ssoOptionDefs, env).options, env);

describe("sso options", () => {
  it("are off without -oidc-issuer, and the others need it", () => {
    expect(settings([])).toBeUndefined();
    expect(() => settings(["-oidc-client-id", "x"])).toThrow(/-oidc-client-id needs -oidc-issuer/);
    expect(() => settings(["-oidc-admins", "a@example.com"])).toThrow(UsageError);
  });

  it("read the secret from the file, else from CAPSTAN_OIDC_CLIENT_SECRET; map admins; default ttl 12h", () => {
    const s = settings(["-oidc-issuer", "https://sso.example.com/realms/corp", "-oidc-client-id", "capstan", "-oidc-client-secret-file", secretFile, "-oidc-admins", "Alice@Example.com, bob@example.com,,alice@example.com"]);
    expect(s).toMatchObject({ issuer: "https://sso.example.com/realms/corp", clientId: "capstan", clientSecret: "the-secret", admins: ["alice@example.com", "bob@example.com"], tokenTtlMs: 12 * 3_600_000 });
    const fromEnv = settings(["-oidc-issuer", "http://127.0.0.1:5556", "-oidc-client-id", "capstan", "-sso-token-ttl", "30m"], { CAPSTAN_OIDC_CLIENT_SECRET: "env-secret" });
    expect(fromEnv).toMatchObject({ clientSecret: "env-secret", tokenTtlMs: 30 * 60_000, admins: [] });
    // Every option also reads its CAPSTAN_ variable.
    expect(settings([], { CAPSTAN_OIDC_ISSUER: "http://localhost:5556", CAPSTAN_OIDC_CLIENT_ID: "c", CAPSTAN_OIDC_CLIENT_SECRET: "s" })).toMatchObject({ issuer: "http://localhost:5556" });
  });

  it("refuse plain http to another machine, a missing secret or client id, bad admins and ttls", () => {
    const base = ["-oidc-client-id", "c", "-oidc-client-secret-file", secretFile];
    expect(() => settings(["-oidc-issuer", "http://sso.example.com", ...base])).toThrow(/plain http to another machine/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com?x=1", ...base])).toThrow(/query/);
    expect(() => settings(["-oidc-issuer", "sso.example.com", ...base])).toThrow(/not an absolute URL/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com", "-oidc-client-id", "c"])).toThrow(/-oidc-client-secret-file FILE or CAPSTAN_OIDC_CLIENT_SECRET/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com", "-oidc-client-secret-file", secretFile])).toThrow(/-oidc-client-id/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com", "-oidc-client-id", "c", "-oidc-client-secret-file", join(dir, "none")])).toThrow(/cannot read the file \(ENOENT\)/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com", ...base, "-oidc-admins", "alice"])).toThrow(/"alice" is not an e-mail address/);
    expect(() => settings(["-oidc-issuer", "https://sso.example.com", ...base, "-sso-token-ttl", "30s"])).toThrow(/at least 1m/);
  });

  it("ssoOptionsOf keeps the SSO options alone", () => {
    expect(ssoOptionsOf({ "oidc-issuer": "https://x", web: ":9000", "sso-token-ttl": 1000 })).toEqual({ "oidc-issuer": "https://x", "sso-token-ttl": 1000 });
  });
});
