// One auth proxy under test, in this process, with its real parts around it: an oidc-provider on
// loopback, an echo upstream that records what it receives, and the proxy's node:http server on a
// port of its own. The proxy listens first, so that the provider can register its redirect_uri.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { discoverEndpoints, OidcClient } from "../../../adapters/identity/oidc.ts";
import { parseAuthProxyConfig, type AuthProxyConfig } from "../../../api/authproxy/config.ts";
import { CsrfSigner } from "../../../api/authproxy/csrf.ts";
import { createUpstream } from "../../../api/authproxy/forward.ts";
import { createAuthProxy, type AuthProxyHandler } from "../../../api/authproxy/server.ts";
import { silentLogger } from "../../../runtime/log.ts";
import { startEchoUpstream, type EchoUpstream } from "../../helpers/echo-upstream.ts";
import { startTestProvider, type TestAccount, type TestProvider } from "../../helpers/oidc-provider.ts";

export const clientId = "proxy";
export const clientSecret = "proxy-secret";

export const accounts: Record<string, TestAccount> = {
  alice: { email: "alice@example.com", groups: ["dev", "ops"] },
  // Only ever granted `openid password`: a location asking for sms is out of her reach.
  bob: { email: "bob@example.com", groups: [], scopes: ["password"] },
  // An e-mail the provider has not verified.
  eve: { email: "eve@example.com", email_verified: false },
};

/** The locations of the tests: protected, public, step-up, groups, regex, ^~. */
export const locationsYaml = `location:
  - match: = /health
    auth_type: none
  - match: /public/
    auth_type: none
  - match: ^~ /static/
    auth_type: none
  - match: /admin
    auth_type: password sms
  - match: /team
    groups: true
  - match: ~ \\.php$
  - match: /app
  - match: /ws
`;

export interface ProxyHarness {
  url: string;
  port: number;
  idp: TestProvider;
  upstream: EchoUpstream;
  config: AuthProxyConfig;
  csrf: CsrfSigner;
  oidc: OidcClient;
  stop(): Promise<void>;
}

export interface HarnessOptions {
  /** Extra top-level config keys (YAML lines). */
  extraConfig?: string;
  locations?: string;
  idTokenTtlSeconds?: number;
  jwksCooldownMs?: number;
  /**
   * Called once the proxy and the upstream listen, before the provider starts: answers more
   * redirect_uris to register (nginx in front of the proxy has a callback of its own).
   */
  beforeProvider?: (proxyUrl: string, upstreamUrl: string) => Promise<string[]>;
}

export async function startProxyHarness(opts: HarnessOptions = {}): Promise<ProxyHarness> {
  // Set once the provider is up (the proxy listens before it, for the redirect_uri's port).
  // eslint-disable-next-line prefer-const
  let handler: AuthProxyHandler | undefined;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => handler!.request(req, res));
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => handler!.upgrade(req, socket, head));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  const upstream = await startEchoUpstream();
  const more = opts.beforeProvider ? await opts.beforeProvider(url, upstream.url) : [];
  const idp = await startTestProvider({
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: [`${url}/_sso/`, ...more] }],
    accounts,
    ...(opts.idTokenTtlSeconds !== undefined ? { idTokenTtlSeconds: opts.idTokenTtlSeconds } : {}),
  });
  const config = parseAuthProxyConfig(configYaml(idp.issuer, upstream.url, opts), "conf/config.yaml");
  const endpoints = await discoverEndpoints(config.issuer, config.endpoints);
  const oidc = new OidcClient(endpoints, { clientId, clientSecret, ...(opts.jwksCooldownMs !== undefined ? { jwksCooldownMs: opts.jwksCooldownMs } : {}) });
  const csrf = new CsrfSigner(randomBytes(32));
  handler = createAuthProxy({ config, oidc: () => oidc, upstream: createUpstream(config.upstream, { responseTimeoutMs: 5_000 }), csrf, tls: false, trustForwarded: false, log: silentLogger });
  return {
    url,
    port,
    idp,
    upstream,
    config,
    csrf,
    oidc,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([idp.stop(), upstream.stop()]);
    },
  };
}

/** The harness's config.yaml text. */
export function configYaml(issuer: string, upstreamUrl: string, opts: Pick<HarnessOptions, "extraConfig" | "locations"> = {}): string {
  return `issuer: ${issuer}\nupstream: ${upstreamUrl}\noauth2_client:\n  id: ${clientId}\n  secret: ${clientSecret}\n${opts.extraConfig ?? ""}${opts.locations ?? locationsYaml}`;
}

/** Split a Set-Cookie value into name, value and lower-cased attributes. */
export function parseSetCookie(header: string): { name: string; value: string; attrs: Map<string, string> } {
  const [pair = "", ...rest] = header.split(";");
  const eq = pair.indexOf("=");
  const attrs = new Map<string, string>();
  for (const a of rest) {
    const i = a.indexOf("=");
    attrs.set((i < 0 ? a : a.slice(0, i)).trim().toLowerCase(), i < 0 ? "" : a.slice(i + 1).trim());
  }
  return { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), attrs };
}
