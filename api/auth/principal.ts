// Who is calling, and what they may do: the decisions every Capstan API takes, as plain functions
// of the caller and the object (docs/security.md, "Roles"). No I/O here; the verifier (verifier.ts)
// builds a Principal from a token, the gate (gate.ts) from a request.
//
// Default deny: a permission not written below is not granted.
//
//   role        apps it can read              apps it can write (and exec into)   cluster
//   admin       every app                      every app                           everything
//   user        the apps listing its e-mail    the same apps                       read nodes
//   viewer      the apps granted on the token  none                                read nodes
//   sync        every app (secrets included)   none                                read nodes
//
// "Read" of an app's secrets is narrower: a viewer does not see secret contents (Kubernetes' view
// role leaves Secrets out for the same reason).
import { forbidden } from "../http/index.ts";

export type PrincipalRole = "admin" | "user" | "viewer" | "sync";

export interface Principal {
  /** The token's id (never the token); "-" when authentication is off (-auth none). */
  tokenId: string;
  /** An e-mail for a person, a label for a service token. */
  user: string;
  role: PrincipalRole;
  /** The apps this caller maintains (user) or was granted (viewer); empty for admin and sync. */
  apps: ReadonlySet<string>;
}

/** What a caller does to an app's objects. */
export type AppAction = "read" | "write" | "exec" | "read-secrets";

/** Admin and sync see every app; the others see only their own. */
export function seesAllApps(p: Principal): boolean {
  return p.role === "admin" || p.role === "sync";
}

/** True when `p` may do `action` on the objects of app (namespace) `app`. */
export function may(p: Principal, action: AppAction, app: string): boolean {
  switch (p.role) {
    case "admin":
      return true;
    case "sync":
      return action === "read" || action === "read-secrets";
    case "user":
      return p.apps.has(app);
    case "viewer":
      return action === "read" && p.apps.has(app);
  }
}

/** Throws 403 naming the missing permission unless `p` may do `action` on `app`. */
export function requireApp(p: Principal, action: AppAction, app: string): void {
  if (may(p, action, app)) return;
  const missing = `${action} on app ${app}`;
  throw forbidden(`${describe(p)} may not ${action === "read-secrets" ? "read the secrets of" : action === "exec" ? "exec into" : action} app ${app}`, missing);
}

/** Throws 403 unless `p` is an admin: node operations, tokens, apps, cluster-wide settings. */
export function requireAdmin(p: Principal, what: string): void {
  if (p.role !== "admin") throw forbidden(`${what} needs an admin token; ${describe(p)} is not one`, "admin");
}

/** "alice@example.com (role user)": the caller as error messages and audit lines name it. */
export function describe(p: Principal): string {
  return `${p.user} (role ${p.role})`;
}

/**
 * A non-admin's pod may list only its own app's dependencies (named `<namespace>` or
 * `<namespace>.<name>`, as requireOwnName makes them): the dependency pod runs with its owner's
 * spec, host access included, next to the caller's instances, and a reference keeps the owner from
 * deleting it. Shared dependencies of other apps are an admin's to wire up.
 */
export function requireOwnDependencies(p: Principal, namespace: string, dependencies: readonly { podName: string }[] | undefined, prefix: string): void {
  if (p.role === "admin") return;
  const foreign = (dependencies ?? []).flatMap((d, i) => (d.podName === namespace || d.podName.startsWith(`${namespace}.`) ? [] : [{ path: `${prefix}dependencies[${i}].podName`, message: `${d.podName} is not a dependency of app ${namespace}` }]));
  if (foreign.length === 0) return;
  throw forbidden(`${foreign[0]!.path}: ${foreign[0]!.message}; only an admin may list another app's dependency`, "admin (another app's dependency)", foreign);
}

/** The caller when authentication is off: an admin with no token (loopback listeners only). */
export const anonymousAdmin: Principal = Object.freeze({ tokenId: "-", user: "anonymous", role: "admin", apps: new Set<string>() });

/**
 * Object names are global (one PodGroup `shop.web.web` in the whole cluster), so a non-admin's
 * object must be named for its own app: `<namespace>` or `<namespace>.<anything>`. Without this rule
 * a maintainer of app B could take the name app A's deploy uses (`a.web.web`), and Secret-sync,
 * which finds a group's app from its name, could be pointed at A's secrets.
 */
export function requireOwnName(p: Principal, kind: string, name: string, namespace: string): void {
  if (p.role === "admin" || name === namespace || name.startsWith(`${namespace}.`)) return;
  throw forbidden(`${kind} ${name} is not named for its app ${namespace}: a ${kind} of app ${namespace} must be named ${namespace} or ${namespace}.<name> (only an admin may choose other names)`, "admin (object name outside the app)");
}
