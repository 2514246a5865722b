// The image registry with the clients people use, all real processes talking over 127.0.0.1 only:
// - `capstan up` (its console and its registry listener, token auth wired between them), apps shop
//   (maintainer alice) and blog (maintainer bob), a viewer token for shop;
// - the `docker` CLI against engine n1 (its own DOCKER_CONFIG): alice logs in with her console
//   token and pushes shop/web, her push to blog/web is refused; on engine n2 the viewer of shop
//   pulls and runs it, may not push, and without a login the pull is refused (anonymous pull off);
// - skopeo copies an OCI layout to the registry and back with credentials, layers unchanged;
// - the cleanup steps 1-3 (docs/registry-gc.md, "Collecting") with curl: catalog, tags, soft-delete by digest;
// - two `capstan registry` processes on one S3 bucket (the services' s3rver): pushed through one,
//   pulled through the other;
// - an upload continued across a restart of a `capstan registry` process on a filesystem root.
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PathNotFoundError } from "../../adapters/blobstore/driver.ts";
import { generateToken } from "../../api/console/index.ts";
import { startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices, uniqueName, type S3Service, type Services } from "../helpers/services.ts";

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a program to its end: exit code and output (never throws for a non-zero exit). */
function run(cmd: string, args: string[], o: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { env: o.env ?? process.env, timeout: o.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as { code?: unknown }).code === "number" ? ((error as { code: number }).code) : -1) : 0;
      resolve({ code, stdout, stderr: error && code === -1 ? `${stderr}\n${error.message}` : stderr });
    });
    child.stdin!.end(o.input ?? "");
  });
}

/** Fails with everything the command printed when it did not exit 0. */
function ok(what: string, r: Ran): Ran {
  expect(r.code, `${what} failed (exit ${r.code}):\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r;
}

/** A port the kernel had free a moment ago (for addresses that must be known before start). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A response's status and body, for an assertion's message (the body stays readable). */
async function said(res: Response): Promise<string> {
  return `${res.status} ${await res.clone().text()}`;
}

/** The OCI layout's only manifest: its digest and its layers' digests. */
function ociImage(dir: string): { manifest: string; layers: string[]; config: string } {
  const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as { manifests: { digest: string }[] };
  expect(index.manifests).toHaveLength(1);
  const manifest = index.manifests[0]!.digest;
  const body = JSON.parse(readFileSync(join(dir, "blobs", ...manifest.split(":")), "utf8")) as { config: { digest: string }; layers: { digest: string }[] };
  return { manifest, config: body.config.digest, layers: body.layers.map((l) => l.digest) };
}

const services: Services = loadServices();
const dir = mkdtempSync(join(tmpdir(), "capstan-registry-e2e-"));
// skopeo reads no one's credentials but the ones given on its command line.
const skopeoEnv: NodeJS.ProcessEnv = { ...process.env, REGISTRY_AUTH_FILE: join(dir, "skopeo-auth.json") };
const skopeo = (args: string[]) => run("skopeo", args, { env: skopeoEnv, timeoutMs: 90_000 });
/** An OCI layout of the test image, made once from engine n1 (the images' source for skopeo). */
const layout = join(dir, "layout");

beforeAll(async () => {
  ok(
    "skopeo copy docker-daemon: -> oci:",
    await skopeo(["copy", "--src-daemon-host", services.engines.n1!, `docker-daemon:${services.testImage}`, `oci:${layout}:x`]),
  );
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("capstan up's registry with docker, skopeo and curl", () => {
  const adminToken = generateToken().token;
  let up: CapstanProcess;
  let web = "";
  let registry = ""; // host:port
  const tokens: Record<string, string> = {};
  const users = { alice: "alice@example.com", bob: "bob@example.com", viewer: "vera@example.com" };
  /** Images tagged or pulled on each engine, removed in afterAll. */
  const created: { engine: string; config: string; image: string }[] = [];
  const loggedIn: { engine: string; config: string }[] = [];

  function dockerConfig(name: string): string {
    const d = join(dir, `docker-${name}`);
    mkdirSync(d, { recursive: true });
    return d;
  }

  /** The docker CLI against one engine, with its own DOCKER_CONFIG (nothing touches ~/.docker). */
  function docker(engine: string, config: string, args: string[], input = ""): Promise<Ran> {
    const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_CONFIG: config };
    delete env.DOCKER_HOST;
    delete env.DOCKER_CONTEXT;
    return run("docker", ["-H", services.engines[engine]!, ...args], { env, input, timeoutMs: 90_000 });
  }

  async function consoleCall(path: string, body: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${web}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    expect(res.status, `POST ${path}: ${JSON.stringify(json)}`).toBe(201);
    return json;
  }

  beforeAll(async () => {
    // The realm up publishes is its own -web address, so that needs a fixed port (port 0 would be
    // published as port 0); later -web wins over startCapstan's "-web 127.0.0.1:0".
    const [webPort, registryPort] = [await freePort(), await freePort()];
    registry = `127.0.0.1:${registryPort}`;
    up = await startCapstan(
      "up",
      ["-web", `127.0.0.1:${webPort}`, "-registry-web", registry, "-data", join(dir, "up"), "-cluster", services.cluster],
      { CAPSTAN_ADMIN_TOKEN: adminToken },
    );
    web = up.url;
    expect(web).toBe(`http://127.0.0.1:${webPort}`);
    // Token auth is on once /v2/ challenges with the console's realm.
    await pollUntil(
      "the registry listener challenging with the console's realm",
      async () => {
        const res = await fetch(`http://${registry}/v2/`);
        await res.arrayBuffer();
        return res.status === 401 && res.headers.get("www-authenticate")?.includes(`realm="${web}/api/v1/authorize/registry/"`);
      },
      30_000,
    );
    await consoleCall("/api/v1/apps", { appname: "shop", maintainers: [users.alice] });
    await consoleCall("/api/v1/apps", { appname: "blog", maintainers: [users.bob] });
    tokens.alice = (await consoleCall("/api/v1/tokens", { user: users.alice })).token as string;
    tokens.bob = (await consoleCall("/api/v1/tokens", { user: users.bob })).token as string;
    tokens.viewer = (await consoleCall("/api/v1/tokens", { user: users.viewer, role: "viewer", apps: ["shop"] })).token as string;
  });

  afterAll(async () => {
    for (const c of created) await docker(c.engine, c.config, ["rmi", c.image]);
    for (const l of loggedIn) await docker(l.engine, l.config, ["logout", registry]);
    if (up) {
      const code = await up.stop();
      expect(code, up.log().slice(-3000)).toBe(0);
    }
  });

  let pushedDigest = "";

  it("docker on n1: alice logs in with her console token and pushes shop/web; her push to blog/web is refused", async () => {
    const config = dockerConfig("n1-alice");
    const login = ok("docker login", await docker("n1", config, ["login", registry, "-u", users.alice, "--password-stdin"], tokens.alice));
    loggedIn.push({ engine: "n1", config });
    expect(login.stdout).toContain("Login Succeeded");

    const image = `${registry}/shop/web:v1`;
    ok("docker tag", await docker("n1", config, ["tag", services.testImage, image]));
    created.push({ engine: "n1", config, image });
    const push = ok("docker push", await docker("n1", config, ["push", image]));
    const m = /v1: digest: (sha256:[0-9a-f]{64}) size: \d+/.exec(push.stdout);
    expect(m, push.stdout).not.toBeNull();
    pushedDigest = m![1]!;

    const other = `${registry}/blog/web:v1`;
    ok("docker tag", await docker("n1", config, ["tag", services.testImage, other]));
    created.push({ engine: "n1", config, image: other });
    const refused = await docker("n1", config, ["push", other]);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}\n${refused.stderr}`).toMatch(/denied|unauthorized/);
  });

  it("docker on n2: the viewer of shop pulls and runs shop/web and may not push; without a login the pull is refused", async () => {
    const image = `${registry}/shop/web:v1`;
    // Without credentials first: anonymous pull is off by default.
    const anonymous = await docker("n2", dockerConfig("n2-anonymous"), ["pull", image]);
    expect(anonymous.code).not.toBe(0);
    expect(anonymous.stderr).toMatch(/unauthorized/);

    const config = dockerConfig("n2-viewer");
    ok("docker login (viewer)", await docker("n2", config, ["login", registry, "-u", users.viewer, "--password-stdin"], tokens.viewer));
    loggedIn.push({ engine: "n2", config });
    created.push({ engine: "n2", config, image });
    const pull = ok("docker pull", await docker("n2", config, ["pull", image]));
    expect(pull.stdout).toContain(`Digest: ${pushedDigest}`);
    const hello = ok("docker run", await docker("n2", config, ["run", "--rm", "--network", "none", image, "echo", "hello"]));
    expect(hello.stdout).toBe("hello\n");

    const viewerTag = `${registry}/shop/web:from-viewer`;
    ok("docker tag", await docker("n2", config, ["tag", image, viewerTag]));
    created.push({ engine: "n2", config, image: viewerTag });
    const refused = await docker("n2", config, ["push", viewerTag]);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}\n${refused.stderr}`).toMatch(/denied|unauthorized/);

    // Still refused after the viewer's image is on n2: the daemon asks the registry every time.
    const again = await docker("n2", dockerConfig("n2-anonymous"), ["pull", image]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/unauthorized/);
  });

  it("skopeo copies an OCI layout to shop/tool and back with alice's credentials; the layers are the same", async () => {
    const creds = `${users.alice}:${tokens.alice}`;
    ok("skopeo copy oci: -> docker://", await skopeo(["copy", "--dest-creds", creds, "--dest-tls-verify=false", `oci:${layout}:x`, `docker://${registry}/shop/tool:1`]));
    const back = join(dir, "back");
    ok("skopeo copy docker:// -> oci:", await skopeo(["copy", "--src-creds", creds, "--src-tls-verify=false", `docker://${registry}/shop/tool:1`, `oci:${back}:y`]));
    const src = ociImage(layout);
    const dst = ociImage(back);
    expect(dst.layers.length).toBeGreaterThan(0);
    expect(dst.layers).toEqual(src.layers);
    expect(dst.config).toBe(src.config);
    expect(dst.manifest).toBe(src.manifest);

    // Bob maintains blog, not shop: his credentials do not push to shop.
    const bob = await skopeo(["copy", "--dest-creds", `${users.bob}:${tokens.bob}`, "--dest-tls-verify=false", `oci:${layout}:x`, `docker://${registry}/shop/tool:bob`]);
    expect(bob.code).not.toBe(0);
    expect(bob.stderr).toMatch(/denied|unauthorized/i);
  });

  it("the cleanup steps 1-3 of docs/registry-gc.md with curl: list repositories, list tags, soft-delete by digest", async () => {
    const curl = (args: string[]) => run("curl", ["-sS", ...args], { timeoutMs: 30_000 });
    // A registry token for the admin, for the catalog and pull + delete on shop/web.
    const realm = `${web}/api/v1/authorize/registry/?service=capstan-registry&scope=registry:catalog:*&scope=repository:shop/web:pull,delete`;
    const issued = ok("curl (token)", await curl(["-f", "-u", `admin:${adminToken}`, realm]));
    const token = (JSON.parse(issued.stdout) as { token: string }).token;
    const auth = ["-H", `Authorization: Bearer ${token}`];

    const catalog = JSON.parse(ok("curl _catalog", await curl(["-f", ...auth, `http://${registry}/v2/_catalog`])).stdout) as { repositories: string[] };
    expect(catalog.repositories).toEqual(expect.arrayContaining(["shop/web", "shop/tool"]));
    expect(catalog.repositories).not.toContain("blog/web"); // its push was refused

    const tags = JSON.parse(ok("curl tags/list", await curl(["-f", ...auth, `http://${registry}/v2/shop/web/tags/list`])).stdout) as { name: string; tags: string[] };
    expect(tags).toEqual({ name: "shop/web", tags: ["v1"] });

    const head = ok(
      "curl HEAD manifest",
      await curl(["-f", "-I", ...auth, "-H", "Accept: application/vnd.docker.distribution.manifest.v2+json", `http://${registry}/v2/shop/web/manifests/v1`]),
    );
    const digest = /^docker-content-digest:\s*(\S+)\s*$/im.exec(head.stdout)?.[1];
    expect(digest, head.stdout).toBe(pushedDigest);

    const del = ok("curl DELETE", await curl(["-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", ...auth, `http://${registry}/v2/shop/web/manifests/${digest}`]));
    expect(del.stdout).toBe("202");

    const after = JSON.parse(ok("curl tags/list", await curl(["-f", ...auth, `http://${registry}/v2/shop/web/tags/list`])).stdout) as { tags: string[] };
    expect(after.tags).not.toContain("v1");
    const gone = await curl(["-o", "/dev/null", "-w", "%{http_code}", ...auth, "-H", "Accept: application/vnd.docker.distribution.manifest.v2+json", `http://${registry}/v2/shop/web/manifests/${digest}`]);
    expect(gone.stdout).toBe("404");

    // A token for alice carries no catalog access: the console drops it, the registry refuses.
    const aliceIssued = ok("curl (alice's token)", await curl(["-f", "-u", `${users.alice}:${tokens.alice}`, `${web}/api/v1/authorize/registry/?service=capstan-registry&scope=registry:catalog:*`]));
    const aliceCatalog = await curl(["-o", "/dev/null", "-w", "%{http_code}", "-H", `Authorization: Bearer ${(JSON.parse(aliceIssued.stdout) as { token: string }).token}`, `http://${registry}/v2/_catalog`]);
    expect(aliceCatalog.stdout).toBe("401");
  });
});

describe("capstan registry processes", () => {
  const started: CapstanProcess[] = [];
  const registryEnv = { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" };
  let s3Root: string | undefined;

  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop()));
    const s3 = services.s3;
    if (s3 && s3Root) {
      // Imported here, with the AWS SDK's Node version warning silenced as in the registries.
      Object.assign(process.env, registryEnv);
      const { S3Driver } = await import("../../adapters/blobstore/s3.ts");
      const driver = new S3Driver({ accessKey: s3.accessKey, secretKey: s3.secretKey, region: s3.region, regionEndpoint: s3.endpoint, bucket: s3.bucket, secure: false, rootDirectory: `/${s3Root}` });
      await driver.delete("/").catch((err: unknown) => {
        if (!(err instanceof PathNotFoundError)) throw err;
      });
      await driver.close();
    }
  });

  async function registryProcess(args: string[]): Promise<CapstanProcess> {
    const p = await startCapstan("registry", args, registryEnv);
    started.push(p);
    return p;
  }

  it("two registries on one S3 bucket: an image pushed with skopeo through one is pulled through the other", async () => {
    const s3: S3Service | undefined = services.s3;
    if (!s3) throw new Error("no S3 server in the services env file: run 'scripts/services start' (it starts s3rver)");
    s3Root = uniqueName("registry-e2e");
    const config = join(dir, "s3.yaml");
    writeFileSync(
      config,
      `version: 0.1\nlog:\n  level: info\nstorage:\n  s3:\n    accesskey: ${s3.accessKey}\n    secretkey: ${s3.secretKey}\n    region: ${s3.region}\n` +
        `    regionendpoint: ${s3.endpoint}\n    bucket: ${s3.bucket}\n    secure: false\n    rootdirectory: /${s3Root}\n  delete:\n    enabled: true\n`,
    );
    const [first, second] = await Promise.all([
      registryProcess(["-config", config, "-data", join(dir, "s3-a")]),
      registryProcess(["-config", config, "-data", join(dir, "s3-b")]),
    ]);
    expect(first.url).not.toBe(second.url);
    const host = (p: CapstanProcess) => p.url.replace(/^http:\/\//, "");
    ok("skopeo copy to the first", await skopeo(["copy", "--dest-tls-verify=false", `oci:${layout}:x`, `docker://${host(first)}/e2e/s3img:1`]));
    const pulled = join(dir, "from-s3");
    ok("skopeo copy from the second", await skopeo(["copy", "--src-tls-verify=false", `docker://${host(second)}/e2e/s3img:1`, `oci:${pulled}:z`]));
    const src = ociImage(layout);
    const dst = ociImage(pulled);
    expect(dst.manifest).toBe(src.manifest);
    expect(dst.layers).toEqual(src.layers);
    expect(dst.config).toBe(src.config);
    // The second lists what the first wrote.
    const tags = (await (await fetch(`${second.url}/v2/e2e/s3img/tags/list`)).json()) as { tags: string[] };
    expect(tags.tags).toEqual(["1"]);
  });

  it("an upload started before a restart of the registry is finished after it (filesystem, no auth)", async () => {
    const root = join(dir, "fs-root");
    const config = join(dir, "fs.yaml");
    writeFileSync(config, `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${root}\n  delete:\n    enabled: true\n`);
    const blob = randomBytes(3 * 1024 * 1024 + 17);
    const digest = `sha256:${createHash("sha256").update(blob).digest("hex")}`;
    const half = Math.floor(blob.length / 2);

    const before = await registryProcess(["-config", config]);
    const post = await fetch(`${before.url}/v2/e2e/restart/blobs/uploads/`, { method: "POST" });
    expect(post.status, await said(post)).toBe(202);
    const location = post.headers.get("location")!;
    expect(location).toMatch(/^\/v2\/e2e\/restart\/blobs\/uploads\/[^/]+$/);
    const patch1 = await fetch(`${before.url}${location}`, {
      method: "PATCH",
      headers: { "content-type": "application/octet-stream", "content-range": `0-${half - 1}` },
      body: blob.subarray(0, half),
    });
    expect(patch1.status, await said(patch1)).toBe(202);
    expect(patch1.headers.get("range")).toBe(`0-${half - 1}`);
    expect(await before.stop()).toBe(0);

    // The same root, a new process (and port): the upload is where it was left.
    const after = await registryProcess(["-config", config]);
    const status = await fetch(`${after.url}${location}`);
    expect(status.status, await said(status)).toBe(204);
    expect(status.headers.get("range")).toBe(`0-${half - 1}`);
    const patch2 = await fetch(`${after.url}${location}`, {
      method: "PATCH",
      headers: { "content-type": "application/octet-stream", "content-range": `${half}-${blob.length - 1}` },
      body: blob.subarray(half),
    });
    expect(patch2.status, await said(patch2)).toBe(202);
    expect(patch2.headers.get("range")).toBe(`0-${blob.length - 1}`);
    const put = await fetch(`${after.url}${location}?digest=${encodeURIComponent(digest)}`, { method: "PUT" });
    expect(put.status, await said(put)).toBe(201);
    expect(put.headers.get("docker-content-digest")).toBe(digest);
    const get = await fetch(`${after.url}/v2/e2e/restart/blobs/${digest}`);
    expect(get.status, await said(get)).toBe(200);
    const body = Buffer.from(await get.arrayBuffer());
    expect(`sha256:${createHash("sha256").update(body).digest("hex")}`).toBe(digest);
    expect(body.length).toBe(blob.length);
  });
});
