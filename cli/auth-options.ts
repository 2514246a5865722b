// The options every server command takes about who may call it (docs/security.md):
//
//   -auth token|none            token (default): every API call needs a console access token.
//                               none: no credential is asked for; every caller is an admin. Allowed
//                               only when the process listens on a loopback address.
//   -allowed-host-paths LIST    host directories a non-admin may bind-mount (comma-separated,
//                               absolute); nothing by default.
import { normaliseHostPath } from "../api/auth/index.ts";
import { isLoopbackHost } from "../runtime/loopback.ts";
import { UsageError, type OptionDef, type OptionValues } from "./options.ts";

export { isLoopbackHost };

export const authOptionDefs: OptionDef[] = [
  { name: "auth", type: "string", help: "token: every API call needs an access token; none: no checks (loopback listeners only)", default: "token" },
  { name: "allowed-host-paths", type: "string", help: "host directories non-admins may bind-mount (systemVolumes), comma-separated", default: "" },
];

export interface AuthSettings {
  mode: "token" | "none";
  allowedHostPaths: string[];
}

export function authFromOptions(options: OptionValues): AuthSettings {
  const mode = String(options.auth ?? "token");
  if (mode !== "token" && mode !== "none") throw new UsageError(`-auth: "${mode}" is not token or none`);
  const allowedHostPaths: string[] = [];
  for (const raw of String(options["allowed-host-paths"] ?? "").split(",")) {
    const path = raw.trim();
    if (path === "") continue;
    if (!path.startsWith("/")) throw new UsageError(`-allowed-host-paths: "${path}" is not an absolute path`);
    const normal = normaliseHostPath(path);
    if (normal === "/") throw new UsageError(`-allowed-host-paths: "/" would allow every host path, the Docker socket's directory included`);
    allowedHostPaths.push(normal);
  }
  return { mode, allowedHostPaths };
}

/** Refuses -auth none on a listener other machines can reach, saying why. */
export function checkAuthListener(settings: AuthSettings, host: string): void {
  if (settings.mode === "none" && !isLoopbackHost(host)) {
    throw new UsageError(
      `-auth none is allowed only on a loopback listen address (127.0.0.1, ::1, localhost), not ${host === "0.0.0.0" || host === "::" ? "every interface" : host}: ` +
        "without authentication anyone who reaches the port is an admin of every node. Listen on 127.0.0.1, or keep -auth token",
    );
  }
}
