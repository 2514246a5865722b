// The credentials the engines pull the platform registry's images with (docs/registry.md, "How the
// platform pulls"): for each pull, a registry token that may pull that one repository and nothing
// else, obtained by the orchestrator itself from the console's token endpoint. The engine gets only
// that token (`registrytoken`: docker sends it as `Authorization: Bearer` to the registry and never
// to a realm); the console access token of the controllers' service identity never leaves the
// orchestrator process, except to the token endpoint the console published in the store.
//
// For an image of the platform registry (-registry-host), in order:
//   1. no {realm, service} in the store (/platform/config/auth/registry): token auth is off, the
//      console published none: anonymous;
//   2. a token for its repository still good for a while (cached, see refreshMarginMs): that one;
//   3. the registry answers GET /v2/ without asking for credentials (2xx; asked from this process,
//      no credentials sent): token auth is off there: anonymous;
//   4. else a new token from the realm: GET <realm>?service=<service>&scope=repository:<name>:pull,
//      Basic <the access token's user>:<access token>, with a timeout (adapters/console/registry-token-client.ts).
// Images of any other registry are pulled anonymously. Concurrent pulls of one repository share one
// token request.
import { readFile } from "node:fs/promises";
import { fetch, type Dispatcher } from "undici";
import { pullScope, requestPullToken, type PullToken } from "../../adapters/console/registry-token-client.ts";
import type { RegistryAuthConfig } from "../../api/resources/registry-auth.ts";
import { imageRegistry, type PullCredentials, type RegistryCredentials } from "./image-pull.ts";

/** What the registry's GET /v2/ says: no credentials needed, credentials needed, or no usable answer. */
export type RegistryProbe = "open" | "auth" | "unknown";

export interface PlatformRegistryCredentialsOptions {
  /** The platform registry, `host:port` as image references name it (-registry-host). */
  host: string;
  /** The console access token and its user, read when a token is requested (consoleTokenFile). */
  accessToken: () => Promise<{ user: string; token: string }>;
  /** {realm, issuer, service} the console published in the store; undefined: none (token auth off). */
  authConfig: () => Promise<RegistryAuthConfig | undefined>;
  /**
   * The token endpoint to call instead of the published realm (the service is still the published
   * one): `capstan up` without HTTPS gives its own address on loopback.
   */
  realm?: string;
  /** For HTTPS to the realm and the registry (a CA of their own). */
  dispatcher?: Dispatcher;
  /** Of each call to the realm and each probe of the registry (default 10 s). */
  timeoutMs?: number;
  /**
   * A cached token is used only while it has more than this left (default 60 s, at most half its
   * lifetime): a pull is never handed a token about to expire in the middle of it.
   */
  refreshMarginMs?: number;
  /** Local clock (ms), default Date.now. */
  now?: () => number;
  /** Overrides the GET /v2/ probe (tests). */
  probe?: (host: string, signal: AbortSignal) => Promise<RegistryProbe>;
}

/** The repository of an image reference: "127.0.0.1:5000/shop/web:v1" -> "shop/web". */
export function imageRepository(image: string): string {
  let rest = image;
  const slash = rest.indexOf("/");
  if (slash >= 0 && imageRegistry(rest) !== "docker.io") rest = rest.slice(slash + 1);
  const at = rest.indexOf("@");
  if (at >= 0) rest = rest.slice(0, at);
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) rest = rest.slice(0, colon);
  return rest;
}

/**
 * The console access token in `file` (re-read at each token request, so a rotated token needs no
 * restart) and its user (`userOf`: looked up in the store, as every process checks a token).
 */
export function consoleTokenFile(file: string, userOf: (token: string) => Promise<string>): () => Promise<{ user: string; token: string }> {
  return async () => {
    let token: string;
    try {
      token = (await readFile(file, "utf8")).trim();
    } catch (e) {
      throw new Error(`cannot read the registry token file ${file}: ${(e as Error).message}`, { cause: e });
    }
    if (token === "") throw new Error(`the registry token file ${file} is empty`);
    try {
      return { user: await userOf(token), token };
    } catch (e) {
      throw new Error(`the token in ${file} is not a valid console access token (${(e as Error).message})`, { cause: e });
    }
  };
}

/**
 * GET /v2/ of `host`, HTTPS first and then plain HTTP (as the engines try a registry they treat as
 * insecure), without credentials: "open" for a 2xx, "auth" for a 401, "unknown" otherwise.
 */
export async function probeRegistry(host: string, o: { timeoutMs: number; signal: AbortSignal; dispatcher?: Dispatcher }): Promise<RegistryProbe> {
  for (const scheme of ["https", "http"]) {
    try {
      const res = await fetch(`${scheme}://${host}/v2/`, {
        signal: AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)]),
        redirect: "manual",
        ...(o.dispatcher && { dispatcher: o.dispatcher }),
      });
      await res.body?.cancel();
      if (res.status >= 200 && res.status < 300) return "open";
      if (res.status === 401) return "auth";
      return "unknown";
    } catch {
      if (o.signal.aborted) throw o.signal.reason;
      // not that scheme (or no answer): the next one
    }
  }
  return "unknown";
}

/** Credentials for the platform registry's images: a pull-only token per repository (see the top of this file). */
export function platformRegistryCredentials(o: PlatformRegistryCredentialsOptions): RegistryCredentials {
  const host = o.host.toLowerCase();
  const now = o.now ?? Date.now;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const margin = o.refreshMarginMs ?? 60_000;
  const probe = o.probe ?? ((h, signal) => probeRegistry(h, { timeoutMs, signal, ...(o.dispatcher && { dispatcher: o.dispatcher }) }));
  /** By realm, service and repository. */
  const cache = new Map<string, { token: PullToken; useUntil: number }>();
  const requests = new Map<string, Promise<PullToken>>();

  const fresh = (key: string): PullToken | undefined => {
    const t = now();
    for (const [k, e] of cache) if (e.useUntil <= t) cache.delete(k);
    return cache.get(key)?.token;
  };

  const credentialsOf = (token: PullToken, repository: string): PullCredentials => ({
    auth: { registrytoken: token.token, serveraddress: o.host },
    log: {
      registryUser: token.claims.sub ?? "(anonymous)",
      registryScope: pullScope(repository),
      registryTokenExpiresInS: Math.max(0, Math.round((token.expiresAt - now()) / 1000)),
    },
  });

  return async (image, signal) => {
    if (imageRegistry(image) !== host) return undefined;
    const repository = imageRepository(image);
    const config = await o.authConfig();
    if (config === undefined) return undefined;
    const realm = o.realm ?? config.realm;
    const key = `${realm}\n${config.service}\n${repository}`;
    const cached = fresh(key);
    if (cached) return credentialsOf(cached, repository);
    if ((await probe(o.host, signal)) === "open") return undefined;
    let request = requests.get(key);
    if (request === undefined) {
      request = (async () => {
        const { user, token } = await o.accessToken();
        const t = await requestPullToken({
          realm,
          service: config.service,
          repository,
          user,
          accessToken: token,
          timeoutMs,
          signal,
          now,
          ...(o.dispatcher && { dispatcher: o.dispatcher }),
        });
        cache.set(key, { token: t, useUntil: t.expiresAt - Math.min(margin, t.lifetimeMs / 2) });
        return t;
      })().finally(() => requests.delete(key));
      requests.set(key, request);
    }
    return credentialsOf(await request, repository);
  };
}
