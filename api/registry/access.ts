// What a registry request needs, and who decides: distribution's token auth (docs/registry.md,
// "Token authentication"). The HTTP layer (api.ts) works out the access a request needs
// (`repository:<name>:pull`, `...:pull,push`, `...:delete`, `registry:catalog:*`) and asks the
// RegistryAuthorizer; the token verifier (token-auth.ts) is the real one, `openRegistry` lets
// everyone in (token auth off).

/** One entry of a token's `access` claim, and of what a request needs. */
export interface AccessEntry {
  type: "repository" | "registry";
  /** The repository name, or "catalog" for type registry. */
  name: string;
  /** "pull", "push", "delete", or "*". */
  actions: string[];
}

export type AuthDecision =
  | { ok: true; /** The token's subject (`sub`), for logs. */ subject?: string }
  /** 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...[,error=...]`. */
  | { ok: false; challenge: string; error?: "invalid_token" | "insufficient_scope" };

export interface RegistryAuthorizer {
  /**
   * Decide a request from its Authorization header (undefined when absent) and what it needs.
   * `/v2/` needs nothing but a valid token (an empty `needed`).
   */
  authorize(authorization: string | undefined, needed: AccessEntry[]): Promise<AuthDecision>;
}

/** Token auth off: every request is allowed (a loopback test registry, or no auth configured). */
export const openRegistry: RegistryAuthorizer = { authorize: async () => ({ ok: true }) };

/** `repository:team/app:pull,push` */
export function scopeOf(entry: AccessEntry): string {
  return `${entry.type}:${entry.name}:${entry.actions.join(",")}`;
}
