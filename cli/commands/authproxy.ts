// `capstan authproxy`: the SSO reverse proxy of the spec (docs/authproxy.md), and
// `capstan authproxy generate` (its nginx fragment) and `check-config`.
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { discoverEndpoints, OidcClient } from "../../adapters/identity/oidc.ts";
import { AuthProxyConfigError, configFileName, loadAuthProxyConfig, type AuthProxyConfig } from "../../api/authproxy/config.ts";
import { CsrfSigner } from "../../api/authproxy/csrf.ts";
import { createUpstream } from "../../api/authproxy/forward.ts";
import { nginxFragment } from "../../api/authproxy/nginx-fragment.ts";
import { createAuthProxy } from "../../api/authproxy/server.ts";
import { createLogger, type Logger } from "../../runtime/log.ts";
import { isLoopbackHost } from "../../runtime/loopback.ts";
import { parseListenAddress } from "../listen.ts";
import { readPemOption } from "../option-files.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { tlsFromOptions, tlsOptionDefs } from "../tls-options.ts";

const confOption: OptionDef = { name: "conf", type: "string", help: `directory holding ${configFileName}`, default: "./conf" };

const defs: OptionDef[] = [
  { name: "web", type: "string", help: "listen address (:PORT for every interface; give -tls-cert/-tls-key then)", default: "127.0.0.1:8080" },
  confOption,
  ...tlsOptionDefs,
  { name: "trust-forwarded", type: "bool", help: "take the scheme and host from X-Forwarded-Proto/-Host (only behind nginx or another proxy that sets them)", default: false },
  { name: "upstream-ca", type: "string", help: "CA certificate (PEM file) for an https:// upstream signed by a private CA" },
  { name: "upstream-timeout", type: "duration", help: "how long the upstream may take to answer with headers", default: "60s" },
];

const summary = `Runs the SSO auth proxy: protected locations of DIR/${configFileName} need a login at the
OpenID provider (the authorization code flow; the session is the ID token in the "sso" cookie);
everything else goes to the upstream unchanged. The user's e-mail reaches the upstream in
REMOTE-USER, groups in USER-GROUPS where a location asks for them. Its own paths are under /_sso/
(callback, logout, /_sso/healthz, /_sso/readyz).

sub-commands:
  capstan authproxy generate -conf DIR [-authproxy URL]   the nginx fragment (auth_request) on stdout
  capstan authproxy check-config -conf DIR                 validate without starting (exit 0 valid, 2 invalid)`;

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === "generate") return generate(argv.slice(1));
  if (argv[0] === "check-config") return checkConfig(argv.slice(1));
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(`${usage("authproxy", summary, defs)}\nexample:\n  capstan authproxy -web :8443 -conf /etc/capstan/authproxy -tls-cert proxy.crt -tls-key proxy.key\n`);
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  const o = args.options as { web: string; conf: string; "trust-forwarded": boolean; "upstream-ca"?: string; "upstream-timeout": number };
  const log = createLogger("authproxy");
  const config = readConfig(o.conf);
  if (config === undefined) return 2;
  let listen: { host: string; port: number };
  try {
    listen = parseListenAddress(o.web);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const tls = tlsFromOptions(args.options);
  const ca = o["upstream-ca"] ? readPemOption("upstream-ca", o["upstream-ca"], "CERTIFICATE") : undefined;
  const upstream = createUpstream(config.upstream, { responseTimeoutMs: o["upstream-timeout"], ...(ca ? { ca } : {}) });
  if (tls === undefined && !isLoopbackHost(listen.host)) {
    log.warn({ address: o.web }, "serving plain HTTP on an address other machines can reach: session cookies cross the network in clear; give -tls-cert and -tls-key (or put nginx with TLS in front)");
  }
  warnIfReadable(config.file, log);
  if (config.cookieSecret === undefined) log.info("no cookie_secret in the config: csrf values are signed with a key of this process (logins in flight at a restart start again; replicas need cookie_secret)");
  const secret = config.cookieSecret !== undefined ? Buffer.from(config.cookieSecret) : randomBytes(32);

  let oidc: OidcClient | undefined;
  const stopDiscovery = discoverForever(config, log, (client) => (oidc = client));
  const handler = createAuthProxy({ config, oidc: () => oidc, upstream, csrf: new CsrfSigner(secret), tls: tls !== undefined, trustForwarded: o["trust-forwarded"], log });
  const server: Server = tls ? createHttpsServer({ cert: tls.cert, key: tls.key }, handler.request) : createHttpServer(handler.request);
  server.on("upgrade", handler.upgrade);
  // Bodies stream for as long as they take; a client that never finishes its headers does not hold a socket.
  server.requestTimeout = 0;
  server.headersTimeout = 30_000;
  server.keepAliveTimeout = 65_000;
  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !socket.destroyed) socket.end(`HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    else socket.destroy();
    log.debug({ code: err.code }, "bad request from a client");
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(listen.port, listen.host, () => resolve());
    });
  } catch (e) {
    stopDiscovery();
    process.stderr.write(`capstan authproxy: cannot listen on ${o.web}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
    return 1;
  }
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : listen.port;
  log.info({ address: { host: listen.host, port }, upstream: config.upstream, issuer: config.issuer, locations: config.locations.length, tls: tls !== undefined }, "authproxy is up");

  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      log.info({ signal }, "shutting down");
      stopDiscovery();
      server.close(() => resolve());
      // Idle keep-alive sockets close now; requests in flight get 10 s to finish.
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 10_000).unref();
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  return 0;
}

/**
 * Read the provider's discovery document (or take the configured endpoints) until it works:
 * unprotected locations are served meanwhile, protected ones answer 503 (/_sso/readyz says so).
 */
function discoverForever(config: AuthProxyConfig, log: Logger, ready: (client: OidcClient) => void): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let delayMs = 1_000;
  const attempt = async () => {
    try {
      const endpoints = await discoverEndpoints(config.issuer, config.endpoints);
      if (stopped) return;
      ready(new OidcClient(endpoints, { clientId: config.client.id, clientSecret: config.client.secret }));
      log.info({ authorization: endpoints.authorization, token: endpoints.token, jwks: endpoints.jwks }, "identity provider ready");
    } catch (e) {
      if (stopped) return;
      log.warn({ err: (e as Error).message, retryInMs: delayMs }, "identity provider not reachable; protected locations answer 503 until it is");
      timer = setTimeout(() => void attempt(), delayMs);
      delayMs = Math.min(delayMs * 2, 30_000);
    }
  };
  void attempt();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

function readConfig(dir: string, command = "authproxy"): AuthProxyConfig | undefined {
  try {
    return loadAuthProxyConfig(dir);
  } catch (e) {
    if (!(e instanceof AuthProxyConfigError)) throw e;
    process.stderr.write(`capstan ${command}: ${e.message}\n`);
    return undefined;
  }
}

function warnIfReadable(file: string, log: Logger): void {
  try {
    if ((statSync(file).mode & 0o004) !== 0) log.warn({ file }, "the config holds the client secret and is readable by every user of this machine (chmod 600 or 640)");
  } catch {
    // read a moment ago; nothing to add
  }
}

async function generate(argv: string[]): Promise<number> {
  const gdefs: OptionDef[] = [confOption, { name: "authproxy", type: "string", help: "where nginx reaches capstan authproxy (its -web address)", default: "http://127.0.0.1:8080" }];
  const args = parseArgs(argv, gdefs);
  if (args.help) {
    process.stdout.write(
      `${usage("authproxy generate", `Writes the nginx fragment for DIR/${configFileName} to standard output: include it inside a server { }
block. Protected locations ask capstan authproxy (-authproxy) through auth_request; locations
come out in config order (docs/authproxy.md#nginx).`, gdefs)}\nexample:\n  capstan authproxy generate -conf ./conf -authproxy http://127.0.0.1:8080 > /etc/nginx/snippets/sso.conf\n`,
    );
    return 0;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument "${args.positionals[0]}"`);
  const o = args.options as { conf: string; authproxy: string };
  let url: URL;
  try {
    url = new URL(o.authproxy);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error();
  } catch {
    throw new UsageError(`-authproxy: "${o.authproxy}" is not an http:// or https:// URL`);
  }
  const config = readConfig(o.conf, "authproxy generate");
  if (config === undefined) return 2;
  process.stdout.write(nginxFragment(config, { authProxyUrl: url.toString() }));
  return 0;
}

async function checkConfig(argv: string[]): Promise<number> {
  const args = parseArgs(argv, [confOption]);
  if (args.help) {
    process.stdout.write(`${usage("authproxy check-config", `Validates DIR/${configFileName} as capstan authproxy reads it; every problem with its key and line.`, [confOption])}`);
    return 0;
  }
  const config = readConfig(String(args.options.conf), "authproxy check-config");
  if (config === undefined) return 2;
  process.stdout.write(`${config.file}: valid (${config.locations.length} location${config.locations.length === 1 ? "" : "s"})\n`);
  return 0;
}
