// Whether a host is one no other machine can reach: the test behind "a listener without auth only
// on loopback" and "plain HTTP only to loopback" (docs/security.md).
import { isIP } from "node:net";

/** True for 127.0.0.0/8, ::1 and localhost, with or without IPv6 brackets, any letter case. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (h === "localhost") return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || h === "0:0:0:0:0:0:0:1";
  return false;
}
