// The auth proxy's config.yaml (docs/authproxy.md#configyaml): its keys, and the decisions that page
// records (where `groups` lives, the auth_type values, explicit endpoints, the realm, the
// cookie secret), every problem reported as `FILE:LINE: key: message`. A file with any problem
// does not start the proxy: a typo in a protection rule must never be read as "unprotected".
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isMap, isSeq } from "yaml";
import { isLoopbackHost } from "../../runtime/loopback.ts";
import { readYaml } from "../yaml/reader.ts";
import { parseLocationMatch, type LocationMatch } from "./locations.ts";

export const configFileName = "config.yaml";

/** Login methods an auth_type may name; each is a scope the ID token must carry (docs/authproxy.md#auth_type). */
export const builtInAuthTypes = ["password", "sms", "otp", "webauthn"] as const;

/** Paths under this prefix belong to the proxy (callback, logout, nginx's auth checks). */
export const ssoPrefix = "/_sso/";

export interface ProxyLocation {
  match: LocationMatch;
  /** Scopes the ID token must carry; empty for `auth_type: none`. */
  authTypes: string[];
  /** Pass USER-GROUPS, and require the token to carry a groups claim. */
  groups: boolean;
  /** `FILE:LINE` of the entry, for messages. */
  where: string;
}

export interface AuthProxyConfig {
  file: string;
  /** As written, without a trailing slash; the ID token's `iss` must equal it. */
  issuer: string;
  upstream: string;
  client: {
    id: string;
    secret: string;
    /** Absent: `${scheme}://${http_host}/_sso/` of each request. */
    redirectUri?: string;
    csrfCookieName: string;
  };
  /** Explicit provider endpoints; the discovery document fills what is absent. */
  endpoints: { authorization?: string; token?: string; jwks?: string };
  /** Sent as `realm=` in the authorization request when set. */
  realm?: string;
  /** Signs csrf values; absent, each process makes its own (docs/authproxy.md#several-proxies). */
  cookieSecret?: string;
  locations: ProxyLocation[];
}

export class AuthProxyConfigError extends Error {
  override readonly name = "AuthProxyConfigError";
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n  ${problems.join("\n  ")}`);
  }
}

/** Read DIR/config.yaml; throws AuthProxyConfigError listing every problem. */
export function loadAuthProxyConfig(dir: string): AuthProxyConfig {
  const file = join(dir, configFileName);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new AuthProxyConfigError(file, [`cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`]);
  }
  return parseAuthProxyConfig(text, file);
}

const cookieName = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const authTypeWord = /^[a-z][a-z0-9_.-]*$/;

export function parseAuthProxyConfig(text: string, file: string): AuthProxyConfig {
  const reader = readYaml(text, file);
  if ("syntax" in reader) throw new AuthProxyConfigError(file, reader.syntax);
  const { root, at, fail, resolve, fields, string, strings, boolean, section, problems } = reader;
  if (!isMap(root)) throw new AuthProxyConfigError(file, [`${at(root)}: the file must be a mapping (issuer: ..., upstream: ..., oauth2_client: ..., location: [...])`]);

  const out: Partial<AuthProxyConfig> & { endpoints: AuthProxyConfig["endpoints"] } = { file, endpoints: {} };
  const client: Partial<AuthProxyConfig["client"]> = { csrfCookieName: "sso_csrf" };
  const extraAuthTypes: string[] = [];
  let locationNode: Parameters<typeof string>[0] = null;
  let locationPair: Parameters<typeof string>[2] | undefined;
  const url = (node: Parameters<typeof string>[0], key: string, pair: Parameters<typeof string>[2], opts: { tlsOffLoopback?: boolean } = {}) => {
    const text = string(node, key, pair);
    if (text === undefined) return undefined;
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      return void fail(node, key, `"${text}" is not an absolute URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") return void fail(node, key, `"${text}" must be an http:// or https:// URL`);
    if (u.username || u.password) return void fail(node, key, "must not carry a user or password");
    if (u.hash) return void fail(node, key, "must not carry a #fragment");
    // Host names and addresses only: the URL reaches the nginx fragment, where "$" would be a
    // variable a client's headers could set.
    if (!/^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])$/.test(u.hostname)) return void fail(node, key, `"${text}": the host may hold only letters, digits, "." and "-" (or an IPv6 address in brackets)`);
    if (opts.tlsOffLoopback && u.protocol === "http:" && !isLoopbackHost(u.hostname)) {
      return void fail(node, key, `"${text}" is plain http to another machine: tokens and keys would cross the network unprotected; use https://`);
    }
    return text;
  };

  fields(root, "", {
    issuer: (v, k, p) => {
      const issuer = url(v, k, p, { tlsOffLoopback: true });
      if (issuer !== undefined && (issuer.includes("?"))) fail(v, k, "must not carry a query");
      else if (issuer !== undefined) out.issuer = issuer;
    },
    upstream: (v, k, p) => {
      const upstream = url(v, k, p);
      if (upstream === undefined) return;
      const u = new URL(upstream);
      if ((u.pathname !== "/" && u.pathname !== "") || u.search) fail(v, k, `"${upstream}" must be an origin (scheme://host:port): requests keep their own path`);
      else out.upstream = u.origin;
    },
    oauth2_client: (v, k, p) => {
      if (!section(v, k, p)) return;
      fields(v!, k, {
        id: (n, kk, pp) => (client.id = string(n, kk, pp)),
        secret: (n, kk, pp) => (client.secret = string(n, kk, pp)),
        redirect_uri: (n, kk, pp) => {
          const r = url(n, kk, pp);
          if (r !== undefined && new URL(r).search) fail(n, kk, "must not carry a query");
          else if (r !== undefined) client.redirectUri = r;
        },
        csrf_cookie_name: (n, kk, pp) => {
          const name = string(n, kk, pp);
          if (name === undefined) return;
          if (!cookieName.test(name)) fail(n, kk, `"${name}" is not a valid cookie name`);
          else if (name === "sso") fail(n, kk, `"sso" is the session cookie's name`);
          else client.csrfCookieName = name;
        },
      });
      for (const need of ["id", "secret"]) if (!(v as { has(k: string): boolean }).has(need)) fail(v, `${k}.${need}`, "required, but missing");
    },
    sso_auth_endpoint: (v, k, p) => (out.endpoints.authorization = url(v, k, p, { tlsOffLoopback: true })),
    sso_token_endpoint: (v, k, p) => (out.endpoints.token = url(v, k, p, { tlsOffLoopback: true })),
    sso_jwks_uri: (v, k, p) => (out.endpoints.jwks = url(v, k, p, { tlsOffLoopback: true })),
    realm: (v, k, p) => (out.realm = string(v, k, p)),
    cookie_secret: (v, k, p) => {
      const s = string(v, k, p);
      if (s !== undefined && s.length < 32) fail(v, k, `must be at least 32 characters (has ${s.length})`);
      else out.cookieSecret = s;
    },
    extra_auth_types: (v, k, p) => {
      strings(v, k, p).forEach((w, i) => {
        if (!authTypeWord.test(w) || w === "none") fail(v, `${k}[${i}]`, `"${w}" must be a lower-case word (a-z, 0-9, _ . -), not "none"`);
        else extraAuthTypes.push(w);
      });
    },
    location: (v, k, p) => {
      locationNode = v;
      locationPair = p;
    },
  });
  for (const need of ["issuer", "upstream", "oauth2_client", "location"]) if (!(root as { has(k: string): boolean }).has(need)) fail(root, need, "required, but missing");

  // Locations last: auth_type words are checked against extra_auth_types wherever that key is.
  const known = new Set<string>([...builtInAuthTypes, ...extraAuthTypes]);
  const locations: ProxyLocation[] = [];
  if (locationPair !== undefined) {
    const list = locationNode as Parameters<typeof string>[0];
    if (!isSeq(list)) fail(list ?? locationPair, "location", "must be a list of {match, auth_type, groups}");
    else {
      const seen = new Map<string, string>();
      list.items.forEach((raw, i) => {
        const item = resolve(raw);
        const key = `location[${i}]`;
        if (!isMap(item)) return void fail(item ?? locationPair, key, "must be a mapping {match, auth_type, groups}");
        let match: LocationMatch | undefined;
        let authTypes: string[] = ["password"];
        let groups = false;
        let groupsNode: Parameters<typeof string>[0] = null;
        fields(item, key, {
          match: (n, kk, pp) => {
            const text = string(n, kk, pp);
            if (text === undefined) return;
            const parsed = parseLocationMatch(text);
            if (!parsed.ok) return void fail(n, kk, parsed.error);
            match = parsed.value;
            // nginx sets a variable for each named group: one could overwrite $sso_upstream.
            if ((match.modifier === "~" || match.modifier === "~*") && /\(\?P?<[A-Za-z_]/.test(match.pattern)) return void fail(n, kk, `"${text}": named groups are not allowed (nginx would turn them into variables)`);
            const reserved = reservedProblem(match);
            if (reserved) return void fail(n, kk, reserved);
            const dup = duplicateKey(match);
            const before = dup === undefined ? undefined : seen.get(dup);
            if (before !== undefined) fail(n, kk, `"${text}" duplicates the location at ${before} (nginx refuses duplicate locations)`);
            else if (dup !== undefined) seen.set(dup, at(n));
          },
          auth_type: (n, kk, pp) => {
            const text = string(n, kk, pp);
            if (text === undefined) return;
            const words = text.trim().split(/\s+/);
            if (words.includes("none")) {
              if (words.length > 1) return void fail(n, kk, `"none" cannot be combined with other login methods ("${text}")`);
              authTypes = [];
              return;
            }
            const unknown = words.filter((w) => !known.has(w));
            if (unknown.length > 0) {
              return void fail(n, kk, `unknown login method ${unknown.map((w) => `"${w}"`).join(", ")} (known: none, ${[...known].join(", ")}; add provider-specific ones under extra_auth_types)`);
            }
            authTypes = [...new Set(words)];
          },
          groups: (n, kk, pp) => {
            groupsNode = n;
            groups = boolean(n, kk, pp) ?? false;
          },
        });
        if (!item.has("match")) fail(item, `${key}.match`, "required, but missing");
        if (groups && authTypes.length === 0) fail(groupsNode, `${key}.groups`, "cannot be true with auth_type: none (nobody is logged in to look groups up for)");
        if (match !== undefined) locations.push({ match, authTypes, groups, where: at(item) });
      });
    }
  }
  if (client.redirectUri !== undefined) {
    const problem = callbackPathProblem(new URL(client.redirectUri).pathname, locations);
    if (problem) fail(root, "oauth2_client.redirect_uri", problem);
  }
  if (problems.length > 0) throw new AuthProxyConfigError(file, problems);
  return { ...(out as AuthProxyConfig), client: client as AuthProxyConfig["client"], locations };
}

/**
 * Why a redirect_uri's path cannot be the callback: "/" (every visit to the front page would be a
 * callback), an escape (compared with decoded paths it would never match), one of the proxy's
 * other paths, or a path an `=` location already takes.
 */
function callbackPathProblem(path: string, locations: readonly ProxyLocation[]): string | undefined {
  if (path === "/" || path === "") return "its path cannot be \"/\": give the callback a path of its own, e.g. /_sso/";
  if (path.includes("%")) return `its path "${path}" must not hold %-escapes`;
  if (path.startsWith(ssoPrefix) && path !== ssoPrefix) return `its path under ${ssoPrefix} can only be ${ssoPrefix} itself (the other paths there are the proxy's)`;
  const clash = locations.find((l) => l.match.modifier === "=" && l.match.pattern === path);
  if (clash) return `its path "${path}" is also the location at ${clash.where}`;
  return undefined;
}

/** The proxy's own paths cannot be a user location: they would shadow the callback. */
function reservedProblem(m: LocationMatch): string | undefined {
  if (m.modifier !== "~" && m.modifier !== "~*" && m.pattern.startsWith(ssoPrefix)) {
    return `"${m.text}" is reserved: ${ssoPrefix} belongs to the proxy (callback, logout, nginx's auth checks)`;
  }
  return undefined;
}

/** Locations nginx counts as duplicates: one prefix string (plain or ^~), one exact string. */
function duplicateKey(m: LocationMatch): string | undefined {
  if (m.modifier === "" || m.modifier === "^~") return `prefix ${m.pattern}`;
  if (m.modifier === "=") return `exact ${m.pattern}`;
  return undefined;
}
