// Access for harnesses that test an API's own behaviour, not who may call it: `-auth none`'s gate
// (every caller is the anonymous admin) and no allowed host paths. The role matrix
// (test/integration/auth) tests the token gate over every endpoint.
import { hostAccessPolicy, openGate, type ApiAccess } from "../../api/auth/index.ts";

export const openAccess: ApiAccess = { gate: openGate, hostAccess: hostAccessPolicy() };
