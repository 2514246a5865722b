// The console as the registry's authorization server, over real HTTP on loopback, on a real store
// (a private SQLite file that two consoles share, as two processes would): scopes granted exactly
// per role, the token's header and claims, the certificate and settings published for the registry,
// and the minted tokens accepted by the registry's verifier (api/registry/token-auth.ts) given the
// written certificate. Where Debian's docker-registry (distribution 2.8.2) is installed, a real
// distribution on 127.0.0.1 is pointed at the console and accepts its tokens.
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";
import { createConsoleApi, ensureAdminToken, generateToken } from "../../../api/console/index.ts";
import { ensureRegistrySigningKey, registrySigningKeyKey } from "../../../api/console/registry-token.ts";
import { registryAuthConfigKey } from "../../../api/resources/registry-auth.ts";
import type { AccessEntry } from "../../../api/registry/access.ts";
import { bearerChallenge, jwkThumbprintKeyId, libtrustKeyId, tokenAuthorizer, type TokenAuthSettings } from "../../../api/registry/token-auth.ts";
import { freePort } from "../../../cli/free-port.ts";
import { installRegistryToken, registryTokenSettings } from "../../../cli/registry-token-options.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { call, serveApp, type Served } from "./harness.ts";

const service = "registry.test";
const issuer = "capstan-console";

interface ConsoleServer {
  base: string;
  certFile: string;
  served: Served;
}

/** A console as `capstan console -registry-cert FILE ...` assembles it, served on 127.0.0.1. */
async function startConsole(store: Store, certFile: string, options: Record<string, unknown> = {}): Promise<ConsoleServer> {
  const outer = new Hono();
  const served = await serveApp(outer);
  const verifier = new TokenVerifier({ store });
  const gate = tokenGate(verifier);
  const settings = registryTokenSettings({ web: served.base.replace("http://", ""), "registry-cert": certFile, "registry-service": service, ...options });
  const registryToken = await installRegistryToken({ store, log: silentLogger, verifier, access: { gate } }, settings);
  outer.route("/", createConsoleApi({ store, gate, changed: () => verifier.forget(), registryToken }));
  return { base: served.base, certFile, served };
}

interface TokenAnswer {
  status: number;
  body: { token?: string; access_token?: string; expires_in?: number; issued_at?: string; error?: string; code?: string; errors?: { code: string; message: string }[] };
  headers: Headers;
}

async function askToken(base: string, creds: [string, string] | undefined, scopes: string[], query: Record<string, string> = { service }, path = "/api/v1/authorize/registry/"): Promise<TokenAnswer> {
  const url = new URL(base + path);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  for (const s of scopes) url.searchParams.append("scope", s);
  const headers: Record<string, string> = {};
  if (creds !== undefined) headers.authorization = `Basic ${Buffer.from(`${creds[0]}:${creds[1]}`).toString("base64")}`;
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: (await res.json()) as TokenAnswer["body"], headers: res.headers };
}

const scopes = ["repository:shop:pull,push,delete", "repository:shop/web:pull,push", "repository:blog:pull,push", "repository:shopping:pull", "registry:catalog:*"];
const repo = (name: string, ...actions: string[]): AccessEntry => ({ type: "repository", name, actions });

describe("registry token endpoint on a shared SQLite store", () => {
  let dir = "";
  let storeA: Store;
  let storeB: Store;
  let one: ConsoleServer;
  let two: ConsoleServer;
  const admin = generateToken();
  const creds: Record<string, [string, string]> = {};
  let verifierSettings: () => TokenAuthSettings;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-registry-token-"));
    storeA = new SqliteStore({ path: join(dir, "state.db") });
    storeB = new SqliteStore({ path: join(dir, "state.db") });
    await ensureAdminToken({ store: storeA, envToken: admin.token });
    // Two consoles start together on one store: they race to one signing key.
    [one, two] = await Promise.all([startConsole(storeA, join(dir, "one.pem")), startConsole(storeB, join(dir, "two.pem"), { "registry-anonymous-pull": true })]);
    const api = (method: string, path: string, body: unknown) => call(one.base, method, path, { body, token: admin.token });
    for (const [appname, maintainers] of [
      ["shop", ["alice@example.com"]],
      ["blog", ["bob@example.com"]],
    ] as const) {
      expect((await api("POST", "/api/v1/apps", { appname, maintainers })).status).toBe(201);
    }
    for (const [who, body] of [
      ["admin", { user: "ops@example.com", role: "admin" }],
      ["alice", { user: "alice@example.com" }],
      ["bob", { user: "bob@example.com" }],
      ["vera", { user: "vera@example.com", role: "viewer", apps: ["shop"] }],
      ["sync", { user: "image-puller", role: "sync" }],
      ["nobody", { user: "nobody@example.com" }],
    ] as const) {
      const a = await api("POST", "/api/v1/tokens", body);
      expect(a.status).toBe(201);
      creds[who] = [body.user, (a.body as { token: string }).token];
    }
    const bundle = await readFile(one.certFile, "utf8");
    const config = JSON.parse((await storeA.get(registryAuthConfigKey))!.value) as { realm: string; issuer: string; service: string };
    verifierSettings = () => ({ ...config, rootCertBundle: bundle });
  });

  afterAll(async () => {
    await one?.served.close();
    await two?.served.close();
    await storeA?.close();
    await storeB?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("two consoles share one signing key: the same certificate file, the same kid", async () => {
    const [a, b] = [await readFile(one.certFile, "utf8"), await readFile(two.certFile, "utf8")];
    expect(a).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(b).toBe(a);
    const record = JSON.parse((await storeA.get(registrySigningKeyKey))!.value) as { alg: string; kid: string; certificate: string };
    expect(record.alg).toBe("ES256");
    expect(record.certificate).toBe(a);
    const fromOne = decodeProtectedHeader((await askToken(one.base, creds.alice, [])).body.token!);
    const fromTwo = decodeProtectedHeader((await askToken(two.base, creds.alice, [])).body.token!);
    expect(fromOne.kid).toBe(record.kid);
    expect(fromTwo.kid).toBe(record.kid);
    expect(fromTwo.x5c).toEqual(fromOne.x5c);
  });

  it("many consoles starting at once create exactly one key", async () => {
    const store = new SqliteStore({ path: ":memory:" });
    try {
      const results = await Promise.all(Array.from({ length: 5 }, () => ensureRegistrySigningKey({ store })));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(results.map((r) => r.key.kid)).size).toBe(1);
    } finally {
      await store.close();
    }
  });

  it("publishes {realm, issuer, service} at /platform/config/auth/registry", async () => {
    const config = JSON.parse((await storeA.get(registryAuthConfigKey))!.value) as Record<string, unknown>;
    expect(config.issuer).toBe(issuer);
    expect(config.service).toBe(service);
    expect([`${one.base}/api/v1/authorize/registry/`, `${two.base}/api/v1/authorize/registry/`]).toContain(config.realm);
  });

  const table: [string, AccessEntry[]][] = [
    ["admin", [repo("shop", "pull", "push", "delete"), repo("shop/web", "pull", "push"), repo("blog", "pull", "push"), repo("shopping", "pull"), { type: "registry", name: "catalog", actions: ["*"] }]],
    ["alice", [repo("shop", "pull", "push", "delete"), repo("shop/web", "pull", "push")]],
    ["bob", [repo("blog", "pull", "push")]],
    ["vera", [repo("shop", "pull"), repo("shop/web", "pull")]],
    ["sync", [repo("shop", "pull"), repo("shop/web", "pull"), repo("blog", "pull"), repo("shopping", "pull")]],
    ["nobody", []],
  ];
  it.each(table)("grants %s exactly its role's access, dropping the rest", async (who, expected) => {
    for (const c of [one, two]) {
      const a = await askToken(c.base, creds[who], scopes);
      expect(a.status).toBe(200);
      expect(decodeJwt(a.body.token!).access).toEqual(expected);
    }
  });

  it("answers a docker-shaped token with distribution's header and claims, fresh per request", async () => {
    const before = Math.floor(Date.now() / 1000);
    const a = await askToken(one.base, creds.alice, ["repository:shop:push,pull"], { service, account: "alice@example.com", client_id: "docker", offline_token: "true" });
    expect(a.status).toBe(200);
    expect(Object.keys(a.body).sort()).toEqual(["access_token", "expires_in", "issued_at", "token"]);
    expect(a.body.access_token).toBe(a.body.token);
    expect(a.body.expires_in).toBe(300);
    const header = decodeProtectedHeader(a.body.token!);
    const cert = (await readFile(one.certFile, "utf8")).replace(/-----[A-Z ]+-----|\s/g, "");
    const x509 = new X509Certificate(await readFile(one.certFile));
    expect(header).toEqual({ alg: "ES256", typ: "JWT", kid: libtrustKeyId(x509.publicKey), x5c: [cert] });
    const claims = decodeJwt(a.body.token!);
    expect(Object.keys(claims).sort()).toEqual(["access", "aud", "exp", "iat", "iss", "jti", "nbf", "sub"]);
    expect(claims).toMatchObject({ iss: issuer, sub: "alice@example.com", aud: service, access: [repo("shop", "push", "pull")] });
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.exp! - claims.iat!).toBe(300);
    expect(Date.parse(a.body.issued_at!)).toBe(claims.iat! * 1000);
    // The next request, without a scope, carries no access from the previous one (the original's leak).
    const next = await askToken(one.base, creds.alice, []);
    const nextClaims = decodeJwt(next.body.token!);
    expect(nextClaims.access).toEqual([]);
    expect(nextClaims.jti).not.toBe(claims.jti);
  });

  it("takes several scopes in one parameter, the path without its slash, and upper-case e-mails", async () => {
    const a = await askToken(one.base, ["Alice@Example.COM", creds.alice![1]], ["repository:shop:pull repository:shop/web:push"], { service }, "/api/v1/authorize/registry");
    expect(a.status).toBe(200);
    expect(decodeJwt(a.body.token!).access).toEqual([repo("shop", "pull"), repo("shop/web", "push")]);
  });

  it("drops malformed scopes and unknown actions instead of failing", async () => {
    const a = await askToken(one.base, creds.admin, ["repository:Shop:pull", "repository:shop:fly,pull", "nonsense", "repository(plugin):shop:pull", "registry:other:*", "repository::pull"]);
    expect(a.status).toBe(200);
    expect(decodeJwt(a.body.token!).access).toEqual([repo("shop", "pull")]);
  });

  const refused: [string, () => [string, string] | undefined, number][] = [
    ["no credentials (anonymous pull off)", () => undefined, 401],
    ["a wrong access token", () => ["alice@example.com", "cst_000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"], 401],
    ["a password that is no token", () => ["alice@example.com", "hunter2"], 401],
    ["another user's name with a valid token", () => ["bob@example.com", creds.alice![1]], 401],
  ];
  it.each(refused)("refuses %s with 401 and a JSON body", async (_name, who, status) => {
    const a = await askToken(one.base, who(), ["repository:shop:pull"]);
    expect(a.status).toBe(status);
    expect(a.body.code).toBe("Unauthorized");
    expect(a.body.error).toMatch(/credentials|access token/);
    expect(a.body.errors?.[0]?.code).toBe("UNAUTHORIZED");
    expect(a.headers.get("www-authenticate")).toBe(`Basic realm="${service}"`);
    expect(a.body.token).toBeUndefined();
  });

  it("refuses malformed Basic credentials and a revoked token", async () => {
    const res = await fetch(`${one.base}/api/v1/authorize/registry/?scope=repository:shop:pull`, { headers: { authorization: `Basic ${Buffer.from("no-colon").toString("base64")}` } });
    expect(res.status).toBe(401);
    const doomed = await call(one.base, "POST", "/api/v1/tokens", { body: { user: "dora@example.com" }, token: admin.token });
    const { id, token } = doomed.body as { id: string; token: string };
    expect((await askToken(one.base, ["dora@example.com", token], [])).status).toBe(200);
    expect((await call(one.base, "DELETE", `/api/v1/tokens/${id}`, { token: admin.token })).status).toBe(200);
    // The other console's cache forgets within its 2 s TTL; this one at once.
    expect((await askToken(one.base, ["dora@example.com", token], [])).status).toBe(401);
    await pollUntil("revocation on the second console", async () => (await askToken(two.base, ["dora@example.com", token], [])).status === 401, 5_000);
  });

  it("answers 400 for another service", async () => {
    const a = await askToken(one.base, creds.admin, ["repository:shop:pull"], { service: "someone-else" });
    expect(a.status).toBe(400);
    expect(a.body.error).toMatch(/unknown service/);
  });

  it("grants anonymous pull, and nothing more, where -registry-anonymous-pull is on", async () => {
    const a = await askToken(two.base, undefined, scopes);
    expect(a.status).toBe(200);
    const claims = decodeJwt(a.body.token!);
    expect(claims.sub).toBeUndefined();
    expect(claims.access).toEqual([repo("shop", "pull"), repo("shop/web", "pull"), repo("blog", "pull"), repo("shopping", "pull")]);
    // Credentials are still checked when given.
    expect((await askToken(two.base, ["alice@example.com", "wrong"], scopes)).status).toBe(401);
  });

  it("mints tokens the registry's verifier accepts with the written certificate, within their scope only", async () => {
    const auth = tokenAuthorizer(verifierSettings);
    const alice = (await askToken(two.base, creds.alice, ["repository:shop/web:pull,push"])).body.token!;
    expect(await auth.authorize(`Bearer ${alice}`, [repo("shop/web", "pull", "push")])).toEqual({ ok: true, subject: "alice@example.com" });
    expect(await auth.authorize(`Bearer ${alice}`, [repo("shop", "pull")])).toMatchObject({ ok: false, error: "insufficient_scope" });
    expect(await auth.authorize(`Bearer ${alice}`, [repo("blog", "pull")])).toMatchObject({ ok: false, error: "insufficient_scope" });
    const bob = (await askToken(one.base, creds.bob, ["repository:shop:pull", "repository:blog:push"])).body.token!;
    expect(await auth.authorize(`Bearer ${bob}`, [repo("blog", "push")])).toMatchObject({ ok: true });
    expect(await auth.authorize(`Bearer ${bob}`, [repo("shop", "pull")])).toMatchObject({ ok: false, error: "insufficient_scope" });
    const admin = (await askToken(one.base, creds.admin, ["registry:catalog:*"])).body.token!;
    expect(await auth.authorize(`Bearer ${admin}`, [{ type: "registry", name: "catalog", actions: ["*"] }])).toMatchObject({ ok: true });
    // Another deployment's registry (another service) refuses it.
    const elsewhere = tokenAuthorizer(() => ({ ...verifierSettings(), service: "other.registry" }));
    expect(await elsewhere.authorize(`Bearer ${alice}`, [repo("shop/web", "pull")])).toMatchObject({ ok: false, error: "invalid_token" });
  });
});

// ------------------------------------------------------------------------------------------------
// distribution 2.8.2 (Debian's docker-registry) against the console: only 127.0.0.1 traffic.

const distributionBinary = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"].find((p) => existsSync(p));

/** What docker does: GET, on a Bearer challenge ask the realm for the challenge's service and scope, retry. */
async function dockerRequest(method: string, url: string, creds: [string, string] | undefined): Promise<{ status: number; body: string; challenge: string | null; token?: string }> {
  const first = await fetch(url, { method, signal: AbortSignal.timeout(10_000) });
  const challenge = first.headers.get("www-authenticate");
  if (first.status !== 401 || challenge === null) return { status: first.status, body: await first.text(), challenge };
  await first.body?.cancel();
  const params = Object.fromEntries([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
  const tokenUrl = new URL(params.realm!);
  tokenUrl.searchParams.set("service", params.service!);
  if (params.scope) tokenUrl.searchParams.set("scope", params.scope);
  const headers: Record<string, string> = creds ? { authorization: `Basic ${Buffer.from(`${creds[0]}:${creds[1]}`).toString("base64")}` } : {};
  const t = await fetch(tokenUrl, { headers, signal: AbortSignal.timeout(10_000) });
  const tokenBody = (await t.json()) as { token?: string };
  if (t.status !== 200 || tokenBody.token === undefined) return { status: t.status, body: JSON.stringify(tokenBody), challenge };
  return withToken(method, url, tokenBody.token);
}

async function withToken(method: string, url: string, token: string): Promise<{ status: number; body: string; challenge: string | null; token: string }> {
  const res = await fetch(url, { method, headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.text(), challenge: res.headers.get("www-authenticate"), token };
}

// scripts/services installs Debian's docker-registry: missing, the test fails saying so (never a silent skip).
describe("distribution 2.8.2 accepts the console's tokens", () => {
  let dir = "";
  let store: Store;
  let consoleServer: ConsoleServer;
  let registry: ChildProcess | undefined;
  let registryOutput = "";
  let base = "";
  const admin = generateToken();
  const creds: Record<string, [string, string]> = {};
  let settings: () => TokenAuthSettings;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-distribution-"));
    store = new SqliteStore({ path: join(dir, "state.db") });
    await ensureAdminToken({ store, envToken: admin.token });
    consoleServer = await startConsole(store, join(dir, "registry-token.pem"));
    const api = (path: string, body: unknown) => call(consoleServer.base, "POST", path, { body, token: admin.token });
    expect((await api("/api/v1/apps", { appname: "shop", maintainers: ["alice@example.com"] })).status).toBe(201);
    for (const [who, body] of [
      ["admin", { user: "ops@example.com", role: "admin" }],
      ["alice", { user: "alice@example.com" }],
      ["vera", { user: "vera@example.com", role: "viewer", apps: ["shop"] }],
    ] as const) {
      const a = await api("/api/v1/tokens", body);
      creds[who] = [body.user, (a.body as { token: string }).token];
    }
    const config = JSON.parse((await store.get(registryAuthConfigKey))!.value) as { realm: string; issuer: string; service: string };
    const bundle = await readFile(consoleServer.certFile, "utf8");
    settings = () => ({ ...config, rootCertBundle: bundle });
    const port = await freePort("127.0.0.1");
    base = `http://127.0.0.1:${port}`;
    const cfg = join(dir, "config.yml");
    await writeFile(
      cfg,
      [
        "version: 0.1",
        "log:",
        "  level: warn",
        "storage:",
        "  filesystem:",
        `    rootdirectory: ${join(dir, "data")}`,
        "  delete:",
        "    enabled: true",
        "http:",
        `  addr: 127.0.0.1:${port}`,
        "auth:",
        "  token:",
        `    realm: ${config.realm}`,
        `    service: ${config.service}`,
        `    issuer: ${config.issuer}`,
        `    rootcertbundle: ${consoleServer.certFile}`,
        "",
      ].join("\n"),
    );
    const env = { ...process.env };
    delete env.AWS_CA_BUNDLE;
    if (distributionBinary === undefined) throw new Error("no /usr/bin/docker-registry: run 'scripts/services start' (it installs Debian's docker-registry)");
    registry = spawn(distributionBinary, ["serve", cfg], { env, stdio: ["ignore", "pipe", "pipe"] });
    registry.stdout!.on("data", (d: Buffer) => (registryOutput += d.toString()));
    registry.stderr!.on("data", (d: Buffer) => (registryOutput += d.toString()));
    await pollUntil(
      "distribution to answer /v2/",
      async () => {
        if (registry!.exitCode !== null) throw new Error(`docker-registry exited ${registry!.exitCode}: ${registryOutput.slice(-2000)}`);
        return (await fetch(`${base}/v2/`, { signal: AbortSignal.timeout(2_000) })).status === 401;
      },
      20_000,
      100,
    );
  });

  afterAll(async () => {
    if (registry !== undefined && registry.exitCode === null) {
      const exited = new Promise((resolve) => registry!.once("exit", resolve));
      registry.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (registry.exitCode === null) registry.kill("SIGKILL");
    }
    await consoleServer?.served.close();
    await store?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("challenges as our verifier does, and sends docker to the console's realm", async () => {
    const res = await fetch(`${base}/v2/shop/tags/list`);
    expect(res.status).toBe(401);
    const challenge = res.headers.get("www-authenticate");
    expect(challenge).toBe(bearerChallenge(settings(), [repo("shop", "pull")]));
    expect(challenge).toContain(`realm="${consoleServer.base}/api/v1/authorize/registry/"`);
    const ours = await tokenAuthorizer(settings).authorize(undefined, [repo("shop", "pull")]);
    expect(ours).toEqual({ ok: false, challenge });
  });

  it("a maintainer's token is authorized: tags/list answers 404 NAME_UNKNOWN, an upload starts", async () => {
    const tags = await dockerRequest("GET", `${base}/v2/shop/web/tags/list`, creds.alice);
    expect(tags.status, registryOutput.slice(-2000)).toBe(404);
    expect(JSON.parse(tags.body).errors[0].code).toBe("NAME_UNKNOWN");
    const upload = await dockerRequest("POST", `${base}/v2/shop/web/blobs/uploads/`, creds.alice);
    expect(upload.status).toBe(202);
    expect((await withToken("GET", `${base}/v2/`, tags.token!)).status).toBe(200);
  });

  it("a viewer may pull but not push; a maintainer of nothing there gets insufficient_scope, as our verifier says", async () => {
    expect((await dockerRequest("GET", `${base}/v2/shop/tags/list`, creds.vera)).status).toBe(404);
    const push = await dockerRequest("POST", `${base}/v2/shop/blobs/uploads/`, creds.vera);
    expect(push.status).toBe(401);
    expect(push.challenge).toMatch(/,error="insufficient_scope"$/);
    expect(await tokenAuthorizer(settings).authorize(`Bearer ${push.token}`, [repo("shop", "pull", "push")])).toMatchObject({ ok: false, error: "insufficient_scope" });
    const other = await dockerRequest("GET", `${base}/v2/blog/tags/list`, creds.alice);
    expect(other.status).toBe(401);
    expect(other.challenge).toBe(bearerChallenge(settings(), [repo("blog", "pull")], "insufficient_scope"));
  });

  it("an admin lists the catalog", async () => {
    const catalog = await dockerRequest("GET", `${base}/v2/_catalog`, creds.admin);
    expect(catalog.status).toBe(200);
    expect(JSON.parse(catalog.body)).toHaveProperty("repositories");
  });

  it("without credentials (anonymous pull off) docker gets no token", async () => {
    const anonymous = await dockerRequest("GET", `${base}/v2/shop/tags/list`, undefined);
    expect(anonymous.status).toBe(401);
    expect(anonymous.token).toBeUndefined();
  });

  it("accepts the stored key under its libtrust kid alone (no x5c), refuses forged and RFC 7638-kid tokens (2.8)", async () => {
    const { key } = await ensureRegistrySigningKey({ store });
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: settings().issuer, aud: settings().service, sub: "test", iat: now, nbf: now, exp: now + 120, jti: "t", access: [repo("shop", "pull")] };
    const sign = (kid: string, privateKey = key.privateKey) => new SignJWT({ ...claims }).setProtectedHeader({ alg: "ES256", typ: "JWT", kid }).sign(privateKey);
    expect((await withToken("GET", `${base}/v2/shop/tags/list`, await sign(key.kid))).status).toBe(404);
    const forged = await withToken("GET", `${base}/v2/shop/tags/list`, await sign(key.kid, generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey));
    expect(forged.status).toBe(401);
    expect(forged.challenge).toMatch(/,error="invalid_token"$/);
    expect(forged.challenge).toBe(bearerChallenge(settings(), [repo("shop", "pull")], "invalid_token"));
    // distribution 2.8 looks kids up in libtrust form only; our verifier also takes v3's form.
    const rfc7638 = await sign(await jwkThumbprintKeyId(key.certificate.publicKey));
    expect((await withToken("GET", `${base}/v2/shop/tags/list`, rfc7638)).status).toBe(401);
    expect(await tokenAuthorizer(settings).authorize(`Bearer ${rfc7638}`, [repo("shop", "pull")])).toMatchObject({ ok: true });
  });
});
