// The shared image puller (controllers/shared/image-pull.ts) over a scripted cluster: one pull per
// node and image however many pods wait, progress while it runs, a failure told once per waiter,
// then a fresh pull. Credentials (controllers/shared/registry-credentials.ts) only for the platform
// registry's images, against the real console token endpoint on loopback: what reaches the engine
// is a registry token that pulls the image's repository and nothing else, never the console
// access token, which goes to the realm the store names and nowhere else.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineError, type PullOptions } from "../../../adapters/cluster/index.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";
import { tokenKey } from "../../../api/console/records.ts";
import { decodeRegistryTokenClaims, pullOnlyProblem } from "../../../adapters/console/registry-token-client.ts";
import { readRegistryAuthConfig } from "../../../api/resources/registry-auth.ts";
import { ensureRegistrySigningKey, publishRegistryAuthConfig, registryTokenApi, type RegistrySigningKey } from "../../../api/console/registry-token.ts";
import { registryAuthConfigKey } from "../../../api/resources/registry-auth.ts";
import { controllersTokenRole, controllersTokenUser, ensureServiceToken } from "../../../api/console/service-token.ts";
import { imageRegistry, ImagePuller } from "../../../controllers/shared/image-pull.ts";
import { consoleTokenFile, imageRepository, platformRegistryCredentials, probeRegistry, type PlatformRegistryCredentialsOptions, type RegistryProbe } from "../../../controllers/shared/registry-credentials.ts";

class Scripted {
  present = new Set<string>();
  pulls: { node: string; image: string; options: PullOptions; resolve: () => void; reject: (e: unknown) => void }[] = [];
  async hasImage(node: string, image: string): Promise<boolean> {
    return this.present.has(`${node}/${image}`);
  }
  pullImage(node: string, image: string, options: PullOptions = {}): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pulls.push({ node, image, options, resolve: () => (this.present.add(`${node}/${image}`), resolve()), reject });
    });
  }
}

const signal = new AbortController().signal;
const tick = () => new Promise((r) => setTimeout(r, 0));
const dir = mkdtempSync(join(tmpdir(), "capstan-puller-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("ImagePuller", () => {
  it("is ready at once for an image the node has, without a pull", async () => {
    const c = new Scripted();
    c.present.add("n1/busybox");
    const p = new ImagePuller({ cluster: c });
    expect(await p.ensureImages("n1", ["busybox", "busybox"], "a", signal)).toEqual({ kind: "ready" });
    expect(c.pulls).toHaveLength(0);
  });

  it("pulls once for every pod waiting, reports progress, and is ready once pulled", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "pulling", message: "pulling r:5000/shop/web:v1 on n2" });
    await tick();
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "b", signal)).toMatchObject({ kind: "pulling" });
    expect(c.pulls).toHaveLength(1);
    c.pulls[0]!.options.onProgress!({ currentBytes: 35, totalBytes: 100, layers: 1, layersDone: 0, status: "Downloading" });
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "pulling", message: "pulling r:5000/shop/web:v1 on n2 (35%)" });
    c.pulls[0]!.resolve();
    await tick();
    expect(await p.ensureImages("n2", ["r:5000/shop/web:v1"], "a", signal)).toEqual({ kind: "ready" });
    expect(p.inFlight).toBe(0);
  });

  it("tells a failure once to each waiter, then pulls afresh", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal);
    await tick();
    await p.ensureImages("n1", ["r:5000/nope:v1"], "b", signal);
    c.pulls[0]!.reject(new EngineError("pullImage r:5000/nope:v1 on n1: manifest unknown", "n1", "r:5000/nope:v1", "pullImage", 404));
    await tick();
    const failed = { kind: "failed", message: "image pull failed: r:5000/nope:v1 on n1: manifest unknown" };
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal)).toEqual(failed);
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "b", signal)).toEqual(failed);
    expect(await p.ensureImages("n1", ["r:5000/nope:v1"], "a", signal)).toMatchObject({ kind: "pulling" });
    await tick();
    expect(c.pulls).toHaveLength(2);
  });

  it("aborts the pulls in flight when stopped", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c });
    const stop = new AbortController();
    const running = p.start(stop.signal);
    await p.ensureImages("n1", ["x/y:1"], "a", signal);
    await tick();
    stop.abort();
    await running;
    expect(c.pulls[0]!.options.signal!.aborted).toBe(true);
  });
});

describe("registry credentials", () => {
  it("reads the registry and the repository of a reference as the engine does", () => {
    expect(imageRegistry("busybox")).toBe("docker.io");
    expect(imageRegistry("capstan/busybox:latest")).toBe("docker.io");
    expect(imageRegistry("127.0.0.1:5000/shop/web:v1")).toBe("127.0.0.1:5000");
    expect(imageRegistry("localhost/x")).toBe("localhost");
    expect(imageRegistry("Registry.Example/x")).toBe("registry.example");
    expect(imageRepository("127.0.0.1:5000/shop/web:v1")).toBe("shop/web");
    expect(imageRepository("127.0.0.1:5000/shop/web")).toBe("shop/web");
    expect(imageRepository("r.example/shop@sha256:abc")).toBe("shop");
    expect(imageRepository("localhost/x:1")).toBe("x");
    expect(imageRepository("capstan/busybox:latest")).toBe("capstan/busybox");
  });

  it("reads the console access token from its file, with its user, and names the file when it cannot", async () => {
    const file = join(dir, "token");
    writeFileSync(file, "cst_token\n");
    expect(await consoleTokenFile(file, async (t) => (t === "cst_token" ? "capstan-controllers" : "?"))()).toEqual({ user: "capstan-controllers", token: "cst_token" });
    const bad = consoleTokenFile(file, async () => Promise.reject(new Error("invalid, expired or revoked access token")));
    await expect(bad()).rejects.toThrow(/is not a valid console access token \(invalid, expired or revoked/);
    await expect(consoleTokenFile(join(dir, "none"), async () => "u")()).rejects.toThrow(/cannot read the registry token file/);
  });

  it("keeps only tokens that pull the one repository asked for", () => {
    const claims = (access: { type: string; name: string; actions: string[] }[]) => ({ access });
    expect(pullOnlyProblem(claims([{ type: "repository", name: "shop/web", actions: ["pull"] }]), "shop/web")).toBe("");
    expect(pullOnlyProblem(claims([]), "shop/web")).toBe("it grants no pull on shop/web");
    expect(pullOnlyProblem(claims([{ type: "repository", name: "shop/web", actions: ["pull", "push"] }]), "shop/web")).toMatch(/more than pull on shop\/web \(repository:shop\/web:pull,push\)/);
    expect(pullOnlyProblem(claims([{ type: "repository", name: "shop/web", actions: ["pull"] }, { type: "registry", name: "catalog", actions: ["*"] }]), "shop/web")).toMatch(/more than pull/);
  });
});

/** A node:http server on 127.0.0.1:0 answering every request with `handler`. */
async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; base: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, base: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("registry credentials from the console's token endpoint", () => {
  const service = "capstan-registry";
  const issuer = "capstan-console";
  const registryHost = "127.0.0.1:5000";
  const tokenFile = join(dir, "controllers-token");
  let store: SqliteStore;
  let key: RegistrySigningKey;
  let verifier: TokenVerifier;
  let consoleToken = "";
  let realm = "";
  let http: ServerType;
  /** What the token endpoint was asked: URL and Authorization header. */
  const asked: { url: URL; authorization: string | undefined }[] = [];
  let probe: RegistryProbe = "auth";
  let clock = 1_000_000;

  const credentials = (o: Partial<PlatformRegistryCredentialsOptions> = {}) =>
    platformRegistryCredentials({
      host: registryHost,
      accessToken: consoleTokenFile(tokenFile, async (t) => (await verifier.verify(t)).user),
      authConfig: () => readRegistryAuthConfig(store),
      probe: async () => probe,
      now: () => clock,
      ...o,
    });

  /** The puller's pull of `image` on `node`, once it reached the cluster (or failed before). */
  async function pullOn(p: ImagePuller, c: Scripted, node: string, image: string): Promise<PullOptions | string> {
    const before = c.pulls.length;
    await p.ensureImages(node, [image], "w", signal);
    for (let i = 0; i < 200; i++) {
      if (c.pulls.length > before) return c.pulls[c.pulls.length - 1]!.options;
      const s = await p.ensureImages(node, [image], "w", signal);
      if (s.kind === "failed") return s.message;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`no pull of ${image} on ${node}`);
  }

  beforeAll(async () => {
    store = new SqliteStore({ path: ":memory:" });
    key = (await ensureRegistrySigningKey({ store })).key;
    verifier = new TokenVerifier({ store });
    await ensureServiceToken({ store, file: tokenFile, user: controllersTokenUser, role: controllersTokenRole });
    consoleToken = readFileSync(tokenFile, "utf8").trim();
    const app = new Hono();
    app.use("*", async (c, next) => {
      asked.push({ url: new URL(c.req.url), authorization: c.req.header("authorization") });
      await next();
    });
    app.route("/", registryTokenApi({ key, verifier, gate: tokenGate(verifier), issuer, service }));
    const port = await new Promise<number>((resolve) => {
      http = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => resolve(info.port));
    });
    realm = `http://127.0.0.1:${port}/api/v1/authorize/registry/`;
  });

  afterAll(async () => {
    await new Promise((r) => http?.close(r));
    await store?.close();
  });

  it("pulls anonymously while the store names no realm (token auth off), without asking for a token", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c, credentials: credentials() });
    const options = (await pullOn(p, c, "n1", `${registryHost}/shop/web:v1`)) as PullOptions;
    expect(options.auth).toBeUndefined();
    expect(asked).toHaveLength(0);
  });

  it("hands the engine a registry token that pulls the image's repository only: never the console token, never a password", async () => {
    await publishRegistryAuthConfig(store, { realm, issuer, service });
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c, credentials: credentials() });
    const options = (await pullOn(p, c, "n1", `${registryHost}/shop/web:v1`)) as PullOptions;

    // What reaches the engine: a bearer token and the registry, nothing else.
    expect(Object.keys(options.auth!).sort()).toEqual(["registrytoken", "serveraddress"]);
    expect(options.auth!.serveraddress).toBe(registryHost);
    const sent = JSON.stringify(options);
    expect(sent).not.toContain(consoleToken);
    // The secret part alone (cst_<12 hex id>_<secret>; the secret may itself hold "_").
    expect(sent).not.toContain(consoleToken.slice("cst_".length + 12 + 1));
    expect(sent).not.toMatch(/password|username/i);

    // The token: signed by the console's key, for the registry's service, granting pull on shop/web only.
    const { payload } = await jwtVerify(options.auth!.registrytoken, key.certificate.publicKey, { issuer, audience: service });
    expect(payload.sub).toBe("capstan-controllers");
    expect(payload.access).toEqual([{ type: "repository", name: "shop/web", actions: ["pull"] }]);
    expect(payload.exp! - payload.iat!).toBeLessThanOrEqual(300);

    // The console token went to the published realm only, as the Basic password of its user.
    expect(asked).toHaveLength(1);
    expect(`${asked[0]!.url.origin}${asked[0]!.url.pathname}`).toBe(realm);
    expect(asked[0]!.url.searchParams.get("service")).toBe(service);
    expect(asked[0]!.url.searchParams.getAll("scope")).toEqual(["repository:shop/web:pull"]);
    expect(asked[0]!.authorization).toBe(`Basic ${Buffer.from(`capstan-controllers:${consoleToken}`).toString("base64")}`);
  });

  it("reuses a repository's token until shortly before it expires, and asks per repository", async () => {
    asked.length = 0;
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c, credentials: credentials() });
    const first = (await pullOn(p, c, "n1", `${registryHost}/blog/api:v1`)) as PullOptions;
    const again = (await pullOn(p, c, "n2", `${registryHost}/blog/api:v2`)) as PullOptions;
    expect(again.auth!.registrytoken).toBe(first.auth!.registrytoken);
    expect(asked).toHaveLength(1);
    const other = (await pullOn(p, c, "n2", `${registryHost}/blog/worker:v1`)) as PullOptions;
    expect(decodeRegistryTokenClaims(other.auth!.registrytoken).access).toEqual([{ type: "repository", name: "blog/worker", actions: ["pull"] }]);
    expect(asked).toHaveLength(2);
    clock += 239_000; // a 300 s token is used while it has more than 60 s left
    await pullOn(p, c, "n3", `${registryHost}/blog/api:v3`);
    expect(asked).toHaveLength(2);
    clock += 2_000;
    await pullOn(p, c, "n4", `${registryHost}/blog/api:v4`);
    expect(asked).toHaveLength(3);
  });

  it("pulls anonymously when the registry asks for no credentials, and other registries' images always", async () => {
    asked.length = 0;
    probe = "open";
    try {
      const c = new Scripted();
      const p = new ImagePuller({ cluster: c, credentials: credentials() });
      expect(((await pullOn(p, c, "n1", `${registryHost}/open/web:v1`)) as PullOptions).auth).toBeUndefined();
      probe = "auth";
      expect(((await pullOn(p, c, "n1", "docker.io/library/busybox:1")) as PullOptions).auth).toBeUndefined();
      expect(((await pullOn(p, c, "n1", "127.0.0.1:5001/shop/web:v1")) as PullOptions).auth).toBeUndefined();
      expect(asked).toHaveLength(0);
    } finally {
      probe = "auth";
    }
  });

  it("sends the console token over HTTPS or to loopback only: a plain-HTTP realm elsewhere fails the pull unasked", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c, credentials: credentials({ realm: "http://192.0.2.1:8080/api/v1/authorize/registry/" }) });
    const failed = await pullOn(p, c, "n1", `${registryHost}/shop/db:v1`);
    expect(failed).toMatch(/^image pull failed: 127\.0\.0\.1:5000\/shop\/db:v1 on n1: the registry token realm http:\/\/192\.0\.2\.1:8080\/api\/v1\/authorize\/registry\/ is not HTTPS/);
    expect(failed).not.toContain(consoleToken);
    expect(c.pulls).toHaveLength(0);
  });

  it("fails the pull, naming the endpoint's answer, when the console refuses the token", async () => {
    const record = (await store.get(tokenKey(consoleToken.split("_")[1]!)))!;
    await store.delete(record.key); // revoked
    verifier.forget();
    try {
      const c = new Scripted();
      const p = new ImagePuller({ cluster: c, credentials: credentials() });
      const failed = await pullOn(p, c, "n1", `${registryHost}/shop/cache:v1`);
      expect(failed).toMatch(/^image pull failed: .* on n1: the token in .*controllers-token is not a valid console access token/);
      expect(c.pulls).toHaveLength(0);
    } finally {
      await store.put(record.key, record.value);
      verifier.forget();
    }
  });

  it("fails the pull with the endpoint's answer when it refuses the credentials", async () => {
    const c = new Scripted();
    const p = new ImagePuller({ cluster: c, credentials: credentials({ accessToken: async () => ({ user: "capstan-controllers", token: "cst_000000000000_nope" }) }) });
    const failed = await pullOn(p, c, "n1", `${registryHost}/shop/queue:v1`);
    expect(failed).toMatch(/on n1: the registry token endpoint http:\/\/127\.0\.0\.1:\d+\/api\/v1\/authorize\/registry\/ refused the console access token of capstan-controllers: invalid user name or access token/);
    expect(failed).not.toContain("nope");
    expect(c.pulls).toHaveLength(0);
  });

  it("fails the pull when the store's realm settings are not readable", async () => {
    const kv = (await store.get(registryAuthConfigKey))!;
    await store.put(registryAuthConfigKey, "{");
    try {
      const c = new Scripted();
      const p = new ImagePuller({ cluster: c, credentials: credentials() });
      expect(await pullOn(p, c, "n1", `${registryHost}/shop/other:v1`)).toMatch(/\/platform\/config\/auth\/registry is not JSON/);
    } finally {
      await store.put(kv.key, kv.value);
    }
  });
});

describe("probeRegistry", () => {
  it("tells an open registry from one that asks for credentials, and no answer from either", async () => {
    const open = await listen((_req, res) => res.writeHead(200).end("{}"));
    const closed = await listen((_req, res) => res.writeHead(401, { "www-authenticate": 'Bearer realm="http://127.0.0.1:1/token",service="x"' }).end());
    const odd = await listen((_req, res) => res.writeHead(503).end());
    try {
      const o = { timeoutMs: 2_000, signal };
      expect(await probeRegistry(open.base, o)).toBe("open");
      expect(await probeRegistry(closed.base, o)).toBe("auth");
      expect(await probeRegistry(odd.base, o)).toBe("unknown");
      const gone = odd.base;
      await new Promise((r) => odd.server.close(r));
      expect(await probeRegistry(gone, o)).toBe("unknown");
    } finally {
      open.server.close();
      closed.server.close();
    }
  });
});
