// The console served over real HTTP on loopback (127.0.0.1, a free port), backed by a store the
// caller gives (the shared etcd or a private SQLite store). Console keys are fixed under
// /platform/console/, so the harness remembers every app and token it made and deletes exactly
// those on stop(); app names come from uniqueName().
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";
import type { AddressInfo } from "node:net";
import type { Store } from "../../../adapters/store/store.ts";
import { appKey, createConsoleApi, ensureAdminToken, generateToken, tokenKey, type WallClock } from "../../../api/console/index.ts";
import type { Logger } from "../../../runtime/log.ts";
import { tokenGate, TokenVerifier } from "../../../api/auth/index.ts";

export interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: string; code?: string; message?: string; details?: { path: string; message: string }[] };
  text: string;
}

export interface Served {
  base: string;
  close(): Promise<void>;
}

export async function serveApp(app: Hono): Promise<Served> {
  let server: ServerType | undefined;
  const base = await new Promise<string>((resolve) => {
    server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => resolve(`http://127.0.0.1:${info.port}`));
  });
  return {
    base,
    close: () =>
      new Promise<void>((resolve) => {
        server!.close(() => resolve());
        // Keep-alive sockets of the test's fetch client would hold close() open.
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}

export async function call(base: string, method: string, path: string, opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token !== undefined) headers["access-token"] = opts.token;
  const init: RequestInit = { method, headers };
  if (opts.body !== undefined) {
    if (typeof opts.body === "string" || opts.body instanceof Uint8Array) init.body = opts.body as string;
    else {
      init.body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
  }
  const res = await fetch(base + path, { ...init, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  let body: Answer["body"] = {};
  try {
    body = JSON.parse(text) as Answer["body"];
  } catch {
    // a non-JSON answer: the test asserts on text
  }
  return { status: res.status, body, text };
}

/** A wall clock the test moves: starts at real time. */
export class MovableClock implements WallClock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
}

export class ConsoleHarness {
  readonly clock = new MovableClock();
  /** An admin token registered for this harness (through ensureAdminToken's CAPSTAN_ADMIN_TOKEN path). */
  readonly admin = generateToken();
  private served: Served | undefined;
  private readonly apps = new Set<string>();
  private readonly tokens = new Set<string>([this.admin.id]);

  constructor(
    readonly store: Store,
    readonly log?: Logger,
  ) {}

  get base(): string {
    return this.served!.base;
  }

  async start(): Promise<void> {
    await ensureAdminToken({ store: this.store, envToken: this.admin.token });
    const verifier = new TokenVerifier({ store: this.store, clock: this.clock });
    this.served = await serveApp(
      createConsoleApi({ store: this.store, clock: this.clock, gate: tokenGate(verifier), changed: () => verifier.forget(), ...(this.log ? { log: this.log } : {}) }),
    );
  }

  async stop(): Promise<void> {
    await this.served?.close();
    for (const app of this.apps) await this.store.delete(appKey(app));
    for (const id of this.tokens) await this.store.delete(tokenKey(id));
  }

  call(method: string, path: string, opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
    return call(this.base, method, path, opts);
  }

  /** Remember an app for cleanup (a test that creates one itself). */
  track(app: string): void {
    this.apps.add(app);
  }

  async createApp(appname: string, maintainers: string[]): Promise<void> {
    this.apps.add(appname);
    const a = await this.call("POST", "/api/v1/apps", { body: { appname, maintainers }, token: this.admin.token });
    if (a.status !== 201) throw new Error(`creating app ${appname}: ${a.status} ${a.text}`);
  }

  async createToken(user: string, role: "user" | "sync" | "admin" = "user", expiresIn?: string): Promise<{ id: string; token: string }> {
    const a = await this.call("POST", "/api/v1/tokens", { body: { user, role, ...(expiresIn ? { expiresIn } : {}) }, token: this.admin.token });
    if (a.status !== 201) throw new Error(`creating token for ${user}: ${a.status} ${a.text}`);
    const { id, token } = a.body as { id: string; token: string };
    this.tokens.add(id);
    return { id, token };
  }
}
