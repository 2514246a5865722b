// Identity and authorization for every Capstan API (docs/security.md): the console's access tokens
// checked from the shared store (verifier.ts), the request gate (gate.ts), the role decisions
// (principal.ts), the host-access rules (host-access.ts) and the audit trail (audit.ts).
export { auditObject, auditWrites, callerOf } from "./audit.ts";
export { openGate, requestToken, tokenGate, tokenHeader, type Gate } from "./gate.ts";
export {
  defaultDockerSockets,
  hostAccessOf,
  hostAccessPolicy,
  isUnder,
  normaliseHostPath,
  requireHostAccess,
  type HostAccessFinding,
  type HostAccessPolicy,
} from "./host-access.ts";
export { anonymousAdmin, describe, may, requireAdmin, requireApp, requireOwnDependencies, requireOwnName, seesAllApps, type AppAction, type Principal, type PrincipalRole } from "./principal.ts";
export { badTokenMessage, TokenVerifier, type TokenVerifierOptions } from "./verifier.ts";

import type { Gate } from "./gate.ts";
import type { HostAccessPolicy } from "./host-access.ts";

/** What every orchestrator API is given: who may call (the gate) and the host-access rules. */
export interface ApiAccess {
  gate: Gate;
  hostAccess: HostAccessPolicy;
}
