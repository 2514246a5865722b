// The registry's token auth settings, {realm, issuer, service}, as the console publishes them in the
// store (api/console/registry-token.ts, publishRegistryAuthConfig) and the registry and the
// platform's pulls (controllers/shared/registry-credentials.ts) read them (docs/registry.md, "Token
// authentication"). Here in api/resources/ because a controller reads them too (docs/development.md,
// "Conventions").
import type { Store } from "../../adapters/store/store.ts";

/** Where the registry reads {realm, issuer, service} (docs/registry.md, "Token authentication"). */
export const registryAuthConfigKey = "/platform/config/auth/registry";

export interface RegistryAuthConfig {
  realm: string;
  issuer: string;
  service: string;
}

/** {realm, issuer, service} the console published in the store; undefined when it published none. */
export async function readRegistryAuthConfig(store: Pick<Store, "get">): Promise<RegistryAuthConfig | undefined> {
  const kv = await store.get(registryAuthConfigKey);
  if (kv === null) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(kv.value);
  } catch {
    throw new Error(`${registryAuthConfigKey} is not JSON`);
  }
  const v = (typeof parsed === "object" && parsed !== null ? parsed : {}) as Record<string, unknown>;
  if (typeof v.realm !== "string" || v.realm === "" || typeof v.service !== "string" || v.service === "") {
    throw new Error(`${registryAuthConfigKey} has no realm and service`);
  }
  return { realm: v.realm, service: v.service, issuer: typeof v.issuer === "string" ? v.issuer : "" };
}
