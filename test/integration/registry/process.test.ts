// `capstan registry -config` as an operator runs it: a real process on 127.0.0.1 with filesystem
// storage. /v2/ answers as distribution's does; a second registry on the same root directory
// refuses to start naming the first, and takes over once the first was killed; with -store, the
// store key /platform/config/auth/registry turns token auth on and off while it runs, and a token
// from the console's endpoint (a `capstan console` on the same store, writing the certificate
// bundle the registry reads) is accepted. With the S3 server of scripts/services, an s3 config runs
// too (skipped when the services have none).
import { createHash, randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { generateToken } from "../../../api/console/index.ts";
import { capstanBin, startCapstan, type CapstanProcess } from "../../helpers/capstan-process.ts";
import { makePki, type Pki } from "../../helpers/certs.ts";
import { pollUntil } from "../../helpers/poll.ts";
import { registryAuthConfigKey } from "../../../api/resources/registry-auth.ts";
import { s3Service, uniqueName } from "../../helpers/services.ts";

const authKey = registryAuthConfigKey;
const dir = mkdtempSync(join(tmpdir(), "capstan-registry-"));
const started: CapstanProcess[] = [];
let pki: Pki | undefined;

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
});
afterAll(async () => {
  await pki?.remove();
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(name: string, root: string, extra = ""): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: ${root}\n  delete:\n    enabled: true\nhttp:\n  addr: :5000\n${extra}`);
  return file;
}

async function registry(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CapstanProcess> {
  const p = await startCapstan("registry", args, env);
  started.push(p);
  return p;
}

/** Run a command that is expected to end by itself: its exit code and everything it printed. */
function runToExit(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(capstanBin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CAPSTAN_WEB: "", CAPSTAN_STORE: "" } });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** GET /v2/: the status and the challenge. */
async function base(url: string, token?: string): Promise<{ status: number; challenge: string | null }> {
  const res = await fetch(`${url}/v2/`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  await res.arrayBuffer();
  return { status: res.status, challenge: res.headers.get("www-authenticate") };
}

describe("capstan registry", () => {
  it("serves the registry API on filesystem storage, and a second registry on the same root refuses to start", async () => {
    const root = join(dir, "root-a");
    const config = writeConfig("a", root);
    const first = await registry(["-config", config]);

    const res = await fetch(`${first.url}/v2/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("docker-distribution-api-version")).toBe("registry/2.0");
    expect(await res.json()).toEqual({});
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    const catalog = await fetch(`${first.url}/v2/_catalog`);
    expect(catalog.status).toBe(200);
    expect(await catalog.json()).toEqual({ repositories: [] });
    // The embedded store lives with the registry's data.
    expect(first.log()).toContain(`"store":"sqlite://${root}/capstan/state.db"`);

    const second = await runToExit(["registry", "-web", "127.0.0.1:0", "-config", config]);
    expect(second.code).toBe(1);
    expect(second.output).toContain(`registry root directory ${root} is in use by pid ${first.child.pid} on host ${hostname()} (capstan registry, since `);
    expect(second.output).toContain(`lock file ${root}/capstan/registry.lock`);
    // The first one is untouched by the attempt.
    expect((await fetch(`${first.url}/v2/`)).status).toBe(200);

    // A clean stop releases the root directory.
    expect(await first.stop()).toBe(0);
    const third = await registry(["-config", config]);
    expect((await fetch(`${third.url}/v2/`)).status).toBe(200);
  });

  it("takes the root directory over from a registry that was killed", async () => {
    const root = join(dir, "root-b");
    const config = writeConfig("b", root);
    const first = await registry(["-config", config]);
    first.child.kill("SIGKILL");
    await first.exited;
    const lock = JSON.parse(await readFile(join(root, "capstan", "registry.lock"), "utf8")) as { pid: number };
    expect(lock.pid).toBe(first.child.pid);

    const second = await registry(["-config", config]);
    expect(second.log()).toContain("took over a stale registry root directory lock");
    expect((await fetch(`${second.url}/v2/`)).status).toBe(200);
  });

  it("never serves without token auth on an address other machines reach", async () => {
    // A config without auth.token listening on every interface: refused at start, saying why.
    const open = await runToExit(["registry", "-web", "0.0.0.0:0", "-config", writeConfig("open", join(dir, "root-open"))]);
    expect(open.code).toBe(2);
    expect(open.output).toContain("no token auth");
    expect(open.output).toContain("listen on 127.0.0.1");
    // With -store and no key yet: it starts, and refuses every request until the console publishes.
    pki ??= await makePki();
    const config = writeConfig("closed", join(dir, "root-closed"), `auth:\n  token:\n    rootcertbundle: ${pki.ca}\n`);
    const reg = await registry(["-web", "0.0.0.0:0", "-config", config, "-store", `sqlite://${join(dir, "closed.db")}`]);
    expect((await base(reg.url)).status).toBe(401);
    expect(reg.log()).toContain("every request is refused (the listener is not loopback)");
  });

  it("with -store, turns token auth on and off from the store key while it runs", async () => {
    pki ??= await makePki();
    const storePath = join(dir, "toggle.db");
    const config = writeConfig("toggle", join(dir, "root-c"), `auth:\n  token:\n    rootcertbundle: ${pki.ca}\n`);
    const reg = await registry(["-config", config, "-store", `sqlite://${storePath}`]);
    const store = new SqliteStore({ path: storePath });
    try {
      expect(await base(reg.url)).toEqual({ status: 200, challenge: null });
      expect(reg.log()).toContain("registry token auth off: the store key /platform/config/auth/registry is absent");

      await store.put(authKey, JSON.stringify({ realm: "http://127.0.0.1:9/token-a/", issuer: "issuer-a", service: "service-a" }));
      expect(await pollUntil("token auth on (a)", async () => ((await base(reg.url)).status === 401 ? base(reg.url) : undefined), 10_000)).toEqual({
        status: 401,
        challenge: 'Bearer realm="http://127.0.0.1:9/token-a/",service="service-a"',
      });

      await store.put(authKey, JSON.stringify({ realm: "http://127.0.0.1:9/token-b/", issuer: "issuer-b", service: "service-b" }));
      await pollUntil("the challenge names realm b", async () => (await base(reg.url)).challenge?.includes("token-b") === true, 10_000);
      expect(await base(reg.url)).toEqual({ status: 401, challenge: 'Bearer realm="http://127.0.0.1:9/token-b/",service="service-b"' });

      await store.delete(authKey);
      await pollUntil("token auth off", async () => (await base(reg.url)).status === 200, 10_000);
      expect(reg.log()).toContain("registry token auth off: the store key /platform/config/auth/registry is absent; every request is allowed from now on");
    } finally {
      await store.close();
    }
  });

  it("accepts a token from the console's endpoint once the console publishes the store key", async () => {
    const storePath = join(dir, "console.db");
    const bundle = join(dir, "registry-cert.pem");
    const config = writeConfig("console", join(dir, "root-d"), `auth:\n  token:\n    rootcertbundle: ${bundle}\n`);
    const reg = await registry(["-config", config, "-store", `sqlite://${storePath}`]);
    expect((await base(reg.url)).status).toBe(200);
    expect(reg.log()).toContain("registry token certificate bundle not readable yet");

    const admin = generateToken().token;
    const consoleProcess = await startCapstan("console", ["-store", `sqlite://${storePath}`, "-registry-cert", bundle], { CAPSTAN_ADMIN_TOKEN: admin });
    started.push(consoleProcess);
    const { challenge } = await pollUntil("token auth on", async () => {
      const b = await base(reg.url);
      return b.status === 401 ? b : undefined;
    }, 10_000);
    expect(challenge).toMatch(/^Bearer realm="http:\/\/127\.0\.0\.1:0\/api\/v1\/authorize\/registry\/",service="capstan-registry"$/);

    const scope = "repository:team/app:pull";
    const tokenRes = await fetch(`${consoleProcess.url}/api/v1/authorize/registry/?service=capstan-registry&scope=${encodeURIComponent(scope)}`, {
      headers: { authorization: `Basic ${Buffer.from(`admin:${admin}`).toString("base64")}` },
    });
    expect(tokenRes.status).toBe(200);
    const { token } = (await tokenRes.json()) as { token: string };

    // The bundle file the console wrote is read within a second or two of its change.
    await pollUntil("the console's token accepted", async () => (await base(reg.url, token)).status === 200, 10_000);
    const tags = await fetch(`${reg.url}/v2/team/app/tags/list`, { headers: { authorization: `Bearer ${token}` } });
    expect(tags.status).toBe(404); // authorized: the repository does not exist
    expect(((await tags.json()) as { errors: { code: string }[] }).errors[0]!.code).toBe("NAME_UNKNOWN");
    const anonymous = await fetch(`${reg.url}/v2/team/app/tags/list`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toContain('scope="repository:team/app:pull"');
  });

  it("runs on s3 storage from the config's storage.s3 keys", async () => {
    const { endpoint, accessKey, secretKey, region, bucket } = s3Service();
    const config = join(dir, "s3.yaml");
    writeFileSync(
      config,
      `version: 0.1\nstorage:\n  s3:\n    accesskey: ${accessKey}\n    secretkey: ${secretKey}\n    region: ${region}\n    regionendpoint: ${endpoint}\n` +
        `    bucket: ${bucket}\n    secure: false\n    rootdirectory: /${uniqueName("reg")}\n  delete:\n    enabled: true\nhttp:\n  addr: :5000\n`,
    );
    const reg = await registry(["-config", config, "-data", join(dir, "s3-data")]);
    expect(reg.log()).toContain('"storage":"s3"');
    expect((await base(reg.url)).status).toBe(200);

    // One blob up (POST, then PUT with the digest) and back.
    const blob = randomBytes(1000);
    const digest = `sha256:${createHash("sha256").update(blob).digest("hex")}`;
    const post = await fetch(`${reg.url}/v2/s3test/app/blobs/uploads/`, { method: "POST" });
    expect(post.status).toBe(202);
    const location = new URL(post.headers.get("location")!, reg.url);
    location.searchParams.set("digest", digest);
    const put = await fetch(location, { method: "PUT", body: blob, headers: { "content-type": "application/octet-stream" } });
    expect(put.status).toBe(201);
    const get = await fetch(`${reg.url}/v2/s3test/app/blobs/${digest}`);
    expect(get.status).toBe(200);
    expect(Buffer.from(await get.arrayBuffer()).equals(blob)).toBe(true);
  });
});
