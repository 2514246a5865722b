// The tags of one repository of the platform registry, as `capstan releases` and `capstan deploy`
// (without -image) read them (docs/build.md): `GET /v2/<name>/tags/list`, with distribution's token
// auth (docs/registry.md, "Token authentication"): the 401's challenge names the realm (the
// console's token endpoint), which is asked with Basic <user>:<console access token> for a pull
// token of that repository, and the request is repeated with it.
//
// The access token goes to the realm only over HTTPS or to a loopback address, and no redirect is
// followed (both as adapters/console/registry-token-client.ts does). Every call has a timeout.
import { fetch } from "undici";
import { credentialsMayGoTo } from "../console/registry-token-client.ts";
import { isLoopbackHost } from "../../runtime/loopback.ts";
import { RegistryError } from "./registry-error.ts";

/** http://HOST:PORT for a loopback registry (as docker treats 127.0.0.0/8), https:// otherwise. */
export function registryBaseUrl(registry: string): string {
  if (/^https?:\/\//.test(registry)) return registry.replace(/\/+$/, "");
  const host = registry.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return `${isLoopbackHost(host) ? "http" : "https"}://${registry}`;
}

/** The `Bearer realm=...,service=...` challenge's parameters. */
export function parseChallenge(header: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!/^Bearer\s/i.test(header)) return out;
  for (const m of header.slice(7).matchAll(/(\w+)="([^"]*)"/g)) out[m[1]!] = m[2]!;
  return out;
}

/** Every tag of `repository` ([] when the repository does not exist yet). */
export async function listTags(o: { registry: string; repository: string; user: string; accessToken: string; timeoutMs?: number }): Promise<string[]> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const base = registryBaseUrl(o.registry);
  let bearer: string | undefined;
  const tags: string[] = [];
  let next: string | undefined = `/v2/${o.repository}/tags/list?n=1000`;
  while (next) {
    const url = new URL(next, base);
    let res = await fetch(url, { headers: bearer ? { authorization: `Bearer ${bearer}` } : {}, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
    if (res.status === 401 && bearer === undefined) {
      await res.body?.cancel();
      const c = parseChallenge(res.headers.get("www-authenticate") ?? "");
      if (!c.realm) throw new RegistryError(`${url.origin}: 401 without a Bearer challenge`);
      const realm = new URL(c.realm);
      if (!credentialsMayGoTo(realm)) throw new RegistryError(`the registry's token realm ${realm.origin} is neither HTTPS nor loopback: the access token is not sent there`);
      if (c.service) realm.searchParams.set("service", c.service);
      realm.searchParams.append("scope", `repository:${o.repository}:pull`);
      const t = await fetch(realm, {
        headers: { authorization: `Basic ${Buffer.from(`${o.user}:${o.accessToken}`).toString("base64")}` },
        redirect: "manual",
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = (await t.json().catch(() => ({}))) as { token?: string; message?: string; errors?: { message?: string }[] };
      if (t.status !== 200 || !body.token) throw new RegistryError(`registry token for ${o.repository}: ${t.status} ${body.message ?? body.errors?.[0]?.message ?? ""}`.trim());
      bearer = body.token;
      res = await fetch(url, { headers: { authorization: `Bearer ${bearer}` }, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
    }
    if (res.status === 404) {
      await res.body?.cancel();
      return tags;
    }
    const body = (await res.json().catch(() => ({}))) as { tags?: string[] | null; errors?: { message?: string }[] };
    if (res.status !== 200) throw new RegistryError(`GET ${url.pathname}: ${res.status} ${body.errors?.[0]?.message ?? ""}`.trim());
    tags.push(...(body.tags ?? []));
    const link = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get("link") ?? "");
    next = link ? link[1] : undefined;
  }
  return tags;
}
