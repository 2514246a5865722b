// `capstan login CLUSTER -sso`: a single sign-on login through the cluster's console
// (docs/cli.md, docs/console.md#single-sign-on). The console holds the client secret and talks to
// the provider; this side only
//
//   1. listens on 127.0.0.1 (port 0 by default) for one callback at /callback;
//   2. makes a PKCE verifier (32 random bytes) and asks POST /api/v1/sso/start with its S256
//      challenge and the callback URL;
//   3. prints the authorization URL on stderr (and runs xdg-open when a DISPLAY is set and
//      -no-browser is not given);
//   4. waits (-sso-timeout) for the browser's redirect with code and state, the state equal to the
//      one start answered (any other request is turned away, and it keeps waiting);
//   5. trades code, state and verifier at POST /api/v1/sso/token for a console access token, and
//      answers the browser with a small page saying how it went.
// The token is then saved as `capstan login` saves a token. Nothing here prints the token or code.
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CommandFailure } from "./failure.ts";
import { HttpClient } from "./http-client.ts";
import { ApiError, type CaBundle } from "./http-errors.ts";
import { formatDuration } from "../runtime/duration.ts";

export interface SsoLoginOptions {
  cluster: string;
  /** The console's URL. */
  console: string;
  ca?: CaBundle;
  requestTimeoutMs: number;
  /** How long to wait for the browser's redirect. */
  timeoutMs: number;
  /** Port of the callback listener (0: any free one). */
  port: number;
  /** Run xdg-open (only when DISPLAY is set). */
  openBrowser: boolean;
  /** Where the instructions go (stderr). */
  out?: NodeJS.WritableStream;
}

export interface SsoLoginResult {
  token: string;
  tokenId: string;
  user: string;
  role: string;
  expiresAt: string;
}

interface Callback {
  res: ServerResponse;
  code?: string;
  error?: string;
}

export async function ssoLogin(o: SsoLoginOptions): Promise<SsoLoginResult> {
  const out = o.out ?? process.stderr;
  const http = new HttpClient({ server: o.console, component: "console", requestTimeoutMs: o.requestTimeoutMs, ...(o.ca !== undefined ? { ca: o.ca } : {}) });
  let expectedState: string | undefined;
  let deliver: ((cb: Callback) => void) | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/callback") return page(res, 404, "Not found", "This is capstan login's callback; nothing else is here.");
    if (req.method !== "GET") return page(res, 405, "Method not allowed", "The callback takes GET only.");
    const state = url.searchParams.get("state");
    // A request of another login (or of someone else) is turned away; the login goes on waiting.
    if (expectedState === undefined || state !== expectedState || deliver === undefined) {
      return page(res, 400, "Not this login", "This callback does not carry the state of the login capstan login is waiting for.");
    }
    const error = url.searchParams.get("error");
    if (error !== null) {
      const description = url.searchParams.get("error_description");
      return deliver({ res, error: clean(description ? `${error}: ${description}` : error) });
    }
    const code = url.searchParams.get("code");
    if (code === null || code === "") return page(res, 400, "No code", "The callback carries no code.");
    deliver({ res, code });
  });
  server.headersTimeout = 30_000;
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => reject(new CommandFailure(`cannot listen on 127.0.0.1:${o.port} for the login's callback (${e.code ?? e.message})`)));
    server.listen(o.port, "127.0.0.1", () => resolve());
  });
  const close = () => {
    server.close();
    server.closeAllConnections();
  };
  try {
    const port = (server.address() as AddressInfo).port;
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    const verifier = randomBytes(32).toString("base64url");
    const challenge = createHash("sha256").update(verifier, "ascii").digest("base64url");
    const started = (await http.request("POST", "/api/v1/sso/start", { redirect_uri: redirectUri, code_challenge: challenge })) as { authorization_url?: unknown; state?: unknown };
    if (typeof started?.authorization_url !== "string" || typeof started.state !== "string" || !/^https?:\/\//.test(started.authorization_url)) {
      throw new ApiError(200, "BadAnswer", "POST /api/v1/sso/start answered without authorization_url and state");
    }
    const callback = new Promise<Callback>((resolve) => (deliver = resolve));
    expectedState = started.state;
    out.write(
      `To log in to ${o.cluster}, open this URL in your browser:\n\n  ${started.authorization_url}\n\n` +
        `Waiting up to ${formatDuration(o.timeoutMs)} for the login to finish (callback ${redirectUri})...\n`,
    );
    if (o.openBrowser && process.env.DISPLAY) openInBrowser(started.authorization_url);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new CommandFailure(`no login within ${formatDuration(o.timeoutMs)} (-sso-timeout): open the URL above in a browser on this machine`)), o.timeoutMs);
    });
    let cb: Callback;
    try {
      cb = await Promise.race([callback, timeout]);
    } finally {
      clearTimeout(timer);
    }
    deliver = undefined;
    if (cb.error !== undefined) {
      page(cb.res, 403, "Login refused", `The identity provider refused the login: ${cb.error}. You may close this page.`);
      throw new CommandFailure(`the identity provider refused the login: ${cb.error}`);
    }
    let answer: { id?: unknown; token?: unknown; user?: unknown; role?: unknown; expires_at?: unknown };
    try {
      answer = (await http.request("POST", "/api/v1/sso/token", { code: cb.code, state: started.state, code_verifier: verifier, redirect_uri: redirectUri })) as typeof answer;
    } catch (e) {
      page(cb.res, 502, "Login failed", `The console refused the login: ${e instanceof Error ? e.message : String(e)}. See the terminal; you may close this page.`);
      throw e;
    }
    if (typeof answer?.token !== "string" || typeof answer.user !== "string" || typeof answer.role !== "string") {
      page(cb.res, 502, "Login failed", "The console answered without a token. See the terminal; you may close this page.");
      throw new ApiError(200, "BadAnswer", "POST /api/v1/sso/token answered without token, user and role");
    }
    page(cb.res, 200, "Logged in", `You are logged in to ${o.cluster} as ${answer.user} (role ${answer.role}). You may close this page.`);
    return {
      token: answer.token,
      tokenId: typeof answer.id === "string" ? answer.id : "",
      user: answer.user,
      role: answer.role,
      expiresAt: typeof answer.expires_at === "string" ? answer.expires_at : "",
    };
  } finally {
    close();
  }
}

/** Printable ASCII only, at most 300 characters: a provider's words go to a terminal and a page. */
function clean(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "?").slice(0, 300);
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(res: ServerResponse, status: number, title: string, message: string): void {
  const body = `<!doctype html><meta charset="utf-8"><title>capstan login: ${escapeHtml(title)}</title><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>\n`;
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'",
    "referrer-policy": "no-referrer",
    connection: "close",
  });
  res.end(body);
}

/** xdg-open, detached; any failure is ignored (the URL is printed anyway). */
function openInBrowser(url: string): void {
  try {
    const child = spawn("xdg-open", [url], { stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
  } catch {
    // no xdg-open: the URL is on the terminal
  }
}
