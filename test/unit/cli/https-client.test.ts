// HTTPS between the CLI and the servers, in one process on 127.0.0.1: a Manager serving HTTPS with
// -tls-cert/-tls-key material, the client verifying it with a CA (and refusing it, with a message
// that says why, without one or with another CA); and the console commands whoami and tokens
// against a small local server.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { readCaFile, saveCluster } from "../../../cli/client-config.ts";
import { run as tokens } from "../../../cli/commands/tokens.ts";
import { describeCaller, run as whoami } from "../../../cli/commands/whoami.ts";
import { HttpClient } from "../../../cli/http-client.ts";
import { ServerCertificateError, ServerUnreachableError } from "../../../cli/http-errors.ts";
import { UsageError } from "../../../cli/options.ts";
import { tlsFromOptions } from "../../../cli/tls-options.ts";
import { Manager } from "../../../runtime/manager.ts";
import { makePki, type IssuedCert, type Pki } from "../../helpers/certs.ts";

let pki: Pki;
let other: Pki;
let server: IssuedCert;
beforeAll(async () => {
  [pki, other] = await Promise.all([makePki(), makePki("other-ca")]);
  server = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
}, 60_000);
afterAll(async () => {
  await pki?.remove();
  await other?.remove();
});
afterEach(() => vi.restoreAllMocks());

describe("-tls-cert and -tls-key", () => {
  it("are both or neither, and name the missing one", () => {
    expect(tlsFromOptions({})).toBeUndefined();
    expect(() => tlsFromOptions({ "tls-cert": server.cert })).toThrow(new UsageError("-tls-key is missing: HTTPS needs both -tls-cert and -tls-key (given: -tls-cert; or set CAPSTAN_TLS_KEY)"));
    expect(() => tlsFromOptions({ "tls-key": server.key })).toThrow(/^-tls-cert is missing: /);
  });

  it("name the option and the path of a file they cannot use", async () => {
    const missing = join(pki.dir, "nope.pem");
    expect(() => tlsFromOptions({ "tls-cert": missing, "tls-key": server.key })).toThrow(new UsageError(`-tls-cert ${missing}: cannot read the file (ENOENT)`));
    expect(() => tlsFromOptions({ "tls-cert": server.cert, "tls-key": server.cert })).toThrow(/^-tls-key .*server\.pem: not a PEM file with a PRIVATE KEY/);
    const stranger = await other.issue("stranger", { ip: ["127.0.0.1"] });
    expect(() => tlsFromOptions({ "tls-cert": server.cert, "tls-key": stranger.key })).toThrow(/^-tls-cert .* and -tls-key .*: not a usable certificate and key/);
    expect(tlsFromOptions({ "tls-cert": server.cert, "tls-key": server.key })).toEqual({ cert: readFileSync(server.cert, "utf8"), key: readFileSync(server.key, "utf8") });
  });
});

describe("a Manager with tls", () => {
  let manager: Manager;
  let url = "";
  beforeAll(async () => {
    manager = new Manager({ name: "tls-test", http: { host: "127.0.0.1", port: 0 }, tls: tlsFromOptions({ "tls-cert": server.cert, "tls-key": server.key }) });
    await manager.start();
    url = `https://127.0.0.1:${manager.address()!.port}`;
  });
  afterAll(() => manager?.stop());

  it("serves HTTPS, which the client verifies with the CA", async () => {
    const client = new HttpClient({ server: url, component: "console", ca: readCaFile(pki.ca, { option: "-ca" }) });
    expect(await client.request("GET", "/readyz")).toMatchObject({ status: "ok" });
  });

  it("is refused without the CA, with a message that names the server, the cause and -ca", async () => {
    const err = await new HttpClient({ server: url, component: "console" }).request("GET", "/readyz").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerCertificateError);
    expect((err as Error).message).toBe(
      `cannot verify the console at ${url}: certificate signed by unknown authority (UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate): ` +
        "it is not signed by a CA of the system roots; give the CA that signed it with -ca FILE, CAPSTAN_CA, or capstan login CLUSTER -ca FILE",
    );
  });

  it("is refused with another CA, naming that CA's file", async () => {
    const ca = readCaFile(other.ca, { option: "-ca" });
    const err = await new HttpClient({ server: url, component: "orchestrator", ca }).request("GET", "/readyz").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerCertificateError);
    expect((err as Error).message).toContain(`certificate signed by unknown authority (UNABLE_TO_VERIFY_LEAF_SIGNATURE`);
    expect((err as Error).message).toContain(`it is not signed by the CA in ${other.ca} (-ca)`);
  });

  it("answers an http:// client with a hangup, and the message suggests https://", async () => {
    const plain = url.replace("https://", "http://");
    const err = await new HttpClient({ server: plain, component: "orchestrator" }).request("GET", "/readyz").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerUnreachableError);
    expect((err as Error).message).toMatch(/\(if the server serves HTTPS, use an https:\/\/ URL\)$/);
  });
});

describe("a certificate for another name", () => {
  it("is refused, naming the host the certificate does not list", async () => {
    const named = await pki.issue("named", { dns: ["capstan.example"] });
    const https = createHttpsServer({ cert: readFileSync(named.cert), key: readFileSync(named.key) }, (_req, res) => res.end("{}"));
    await new Promise<void>((resolve) => https.listen(0, "127.0.0.1", resolve));
    try {
      const url = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;
      const err = await new HttpClient({ server: url, component: "orchestrator", ca: readCaFile(pki.ca, { option: "-ca" }) }).request("GET", "/").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServerCertificateError);
      expect((err as Error).message).toMatch(/^cannot verify the orchestrator at https:\/\/127\.0\.0\.1:\d+: the server's certificate is not valid for 127\.0\.0\.1 \(ERR_TLS_CERT_ALTNAME_INVALID: /);
    } finally {
      https.closeAllConnections();
      await new Promise((resolve) => https.close(resolve));
    }
  });
});

describe("whoami and tokens against a console", () => {
  const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
  let console_: Server;
  const requests: { method: string; url: string; token: string | undefined; body: string }[] = [];
  let answer: (req: IncomingMessage) => unknown = () => ({});
  beforeAll(async () => {
    console_ = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        requests.push({ method: req.method!, url: req.url!, token: req.headers["access-token"] as string | undefined, body });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer(req)));
      });
    });
    await new Promise<void>((resolve) => console_.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(console_.address() as AddressInfo).port}`;
    saveCluster("local", { orchestrator: url, secrets: url, console: url, token: "cst_0123456789ab_alice" }, home);
  });
  afterAll(async () => {
    console_.closeAllConnections();
    await new Promise((resolve) => console_.close(resolve));
    rmSync(home, { recursive: true, force: true });
  });

  function output(): { stdout: () => string; stderr: () => string } {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    return { stdout: () => out.mock.calls.map((c) => String(c[0])).join(""), stderr: () => err.mock.calls.map((c) => String(c[0])).join("") };
  }

  it("describeCaller: the user, the token id, the role and the apps", () => {
    expect(describeCaller({ id: "0123456789ab", user: "alice@example.com", role: "user", apps: ["shop", "blog"], allApps: false })).toBe(
      "user alice@example.com (token 0123456789ab), role user, apps: blog, shop",
    );
    expect(describeCaller({ id: "0123456789ab", user: "root", role: "admin", apps: [], allApps: true })).toBe("user root (token 0123456789ab), role admin, apps: all");
    expect(describeCaller({ id: "0123456789ab", user: "c@x.y", role: "viewer", apps: [], allApps: false, expiresAt: "2030-01-01T00:00:00.000Z" })).toBe(
      "user c@x.y (token 0123456789ab), role viewer, apps: none, expires 2030-01-01T00:00:00.000Z",
    );
  });

  it("whoami asks GET /api/v1/whoami with the current cluster's token", async () => {
    answer = () => ({ id: "0123456789ab", user: "alice@example.com", role: "user", apps: ["shop", "blog"], allApps: false });
    const io = output();
    expect(await whoami([], home)).toBe(0);
    expect(io.stdout()).toBe("user alice@example.com (token 0123456789ab), role user, apps: blog, shop\n");
    expect(requests.at(-1)).toMatchObject({ method: "GET", url: "/api/v1/whoami", token: "cst_0123456789ab_alice" });
    expect(await whoami(["-context", "local", "-token", "cst_0123456789ab_other", "-o", "json"], home)).toBe(0);
    expect(requests.at(-1)?.token).toBe("cst_0123456789ab_other");
    expect(JSON.parse(io.stdout().split("\n").slice(1).join("\n"))).toMatchObject({ user: "alice@example.com", allApps: false });
  });

  it("whoami names login when there is no cluster", async () => {
    const empty = mkdtempSync(join(tmpdir(), "capstan-home-"));
    try {
      const io = output();
      expect(await whoami([], empty)).toBe(1);
      expect(io.stderr()).toMatch(/^capstan whoami: no current cluster in .*: give -context CLUSTER, or run capstan login CLUSTER first\n$/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("tokens create -role viewer -apps sends the grants; tokens list shows them", async () => {
    vi.stubEnv("HOME", home);
    answer = (req) =>
      req.method === "POST"
        ? { id: "aaaaaaaaaaaa", token: "cst_aaaaaaaaaaaa_new", user: "carol@example.com", role: "viewer", apps: ["shop", "blog"], createdAt: "2025-01-01T00:00:00.000Z" }
        : [
            { id: "bbbbbbbbbbbb", user: "root", role: "admin", createdAt: "2025-01-02T00:00:00.000Z" },
            { id: "aaaaaaaaaaaa", user: "carol@example.com", role: "viewer", apps: ["shop", "blog"], createdAt: "2025-01-01T00:00:00.000Z", expiresAt: "2025-02-01T00:00:00.000Z", origin: "web-session" },
          ];
    const io = output();
    try {
      expect(await tokens(["create", "local", "-user", "carol@example.com", "-role", "viewer", "-apps", "shop, blog,shop"])).toBe(0);
      expect(requests.at(-1)).toMatchObject({ method: "POST", url: "/api/v1/tokens", token: "cst_0123456789ab_alice" });
      expect(JSON.parse(requests.at(-1)!.body)).toEqual({ user: "carol@example.com", role: "viewer", apps: ["shop", "blog"] });
      expect(io.stdout()).toBe("cst_aaaaaaaaaaaa_new\n");
      expect(io.stderr()).toBe("token aaaaaaaaaaaa for carol@example.com (role viewer, apps shop, blog); it is not shown again\n");
      expect(await tokens(["list"])).toBe(0);
      expect(requests.at(-1)).toMatchObject({ method: "GET", url: "/api/v1/tokens" });
      const lines = io.stdout().split("\n").slice(1);
      expect(lines[0]).toMatch(/^ID\s+USER\s+ROLE\s+APPS\s+CREATED\s+EXPIRES\s+ORIGIN$/);
      expect(lines[1]).toMatch(/^aaaaaaaaaaaa\s+carol@example\.com\s+viewer\s+shop,blog\s+2025-01-01T00:00:00\.000Z\s+2025-02-01T00:00:00\.000Z\s+web-session$/);
      expect(lines[2]).toMatch(/^bbbbbbbbbbbb\s+root\s+admin\s+-\s+2025-01-02T00:00:00\.000Z\s+never\s+create$/);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
