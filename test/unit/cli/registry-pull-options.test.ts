// The orchestrator's registry pull options (-registry-token-file, -registry-host) and the service
// token `capstan up` keeps for its controllers (api/console/service-token.ts).
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { TokenVerifier } from "../../../api/auth/index.ts";
import { ensureServiceToken } from "../../../api/console/service-token.ts";
import { tokenKey } from "../../../api/console/records.ts";
import { orchestratorOptionDefs, orchestratorSettings } from "../../../cli/orchestrator-options.ts";
import { parseArgs, usage, UsageError } from "../../../cli/options.ts";

const settings = (argv: string[], env: Record<string, string> = {}) => orchestratorSettings(parseArgs(argv, orchestratorOptionDefs, env).options);
const dir = mkdtempSync(join(tmpdir(), "capstan-pull-options-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("registry pull options", () => {
  it("are absent by default (every image pulled anonymously)", () => {
    const s = settings([]);
    expect(s.registryTokenFile).toBeUndefined();
    expect(s.registryHost).toBeUndefined();
  });

  it("take a token file with the registry it is for, from the command line or the environment", () => {
    expect(settings(["-registry-token-file", "/etc/capstan/pull-token", "-registry-host", "registry.example:5000"])).toMatchObject({
      registryTokenFile: "/etc/capstan/pull-token",
      registryHost: "registry.example:5000",
    });
    expect(settings([], { CAPSTAN_REGISTRY_TOKEN_FILE: "/t", CAPSTAN_REGISTRY_HOST: "127.0.0.1:5000" })).toMatchObject({ registryTokenFile: "/t", registryHost: "127.0.0.1:5000" });
    expect(settings(["-registry-host", "[::1]:5000"]).registryHost).toBe("[::1]:5000");
  });

  it("refuse a token file without its registry, and a host that is not HOST[:PORT]", () => {
    expect(() => settings(["-registry-token-file", "/t"])).toThrow(new UsageError("-registry-token-file needs -registry-host: the registry whose images the token pulls"));
    expect(() => settings(["-registry-host", "http://127.0.0.1:5000"])).toThrow(/-registry-host: "http:\/\/127.0.0.1:5000" is not HOST\[:PORT\]/);
    expect(() => settings(["-registry-host", "r.example/shop"])).toThrow(UsageError);
  });

  it("are listed in -h with their variables", () => {
    const text = usage("orchestrator", "", orchestratorOptionDefs);
    expect(text).toMatch(/-registry-token-file VALUE +.*\[CAPSTAN_ORCHESTRATOR_REGISTRY_TOKEN_FILE\]/);
    expect(text).toMatch(/-registry-host VALUE +.*\[CAPSTAN_ORCHESTRATOR_REGISTRY_HOST\]/);
  });
});

describe("ensureServiceToken", () => {
  it("makes a sync token once (file 0600, hash in the store), reuses it, and replaces one the store lost", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    try {
      const file = join(dir, "controllers-token");
      const first = await ensureServiceToken({ store, file, user: "capstan-controllers", role: "sync" });
      expect(first.created).toBe(true);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const token = readFileSync(file, "utf8").trim();
      expect(token).toMatch(/^cst_[0-9a-f]{12}_/);
      const record = JSON.parse((await store.get(tokenKey(first.tokenId)))!.value) as Record<string, unknown>;
      expect(record).toMatchObject({ id: first.tokenId, user: "capstan-controllers", role: "sync" });
      expect(JSON.stringify(record)).not.toContain(token.slice(17));
      expect(await new TokenVerifier({ store }).verify(token)).toMatchObject({ user: "capstan-controllers", role: "sync" });

      expect(await ensureServiceToken({ store, file, user: "capstan-controllers", role: "sync" })).toEqual({ created: false, tokenId: first.tokenId });
      expect(readFileSync(file, "utf8").trim()).toBe(token);

      await store.delete(tokenKey(first.tokenId)); // revoked, or a fresh store
      const again = await ensureServiceToken({ store, file, user: "capstan-controllers", role: "sync" });
      expect(again.created).toBe(true);
      expect(again.tokenId).not.toBe(first.tokenId);

      writeFileSync(file, "not a token\n");
      expect((await ensureServiceToken({ store, file, user: "capstan-controllers", role: "sync" })).created).toBe(true);
    } finally {
      await store.close();
    }
  });
});
