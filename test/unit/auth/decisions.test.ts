// The role decisions and host-access rules as plain functions (api/auth), every row of the tables
// in docs/security.md.
import { describe, expect, it } from "vitest";
import { hostAccessOf, hostAccessPolicy, isUnder, may, requestToken, requireHostAccess, requireOwnDependencies, requireOwnName, type AppAction, type Principal } from "../../../api/auth/index.ts";
import { loopbackHostHeader } from "../../../api/auth/gate.ts";
import { ApiError } from "../../../api/http/index.ts";

const who = (role: Principal["role"], apps: string[] = []): Principal => ({ tokenId: "0123456789ab", user: "u@example.com", role, apps: new Set(apps) });
const admin = who("admin");
const maintainerA = who("user", ["a"]);
const viewerA = who("viewer", ["a"]);
const sync = who("sync");

function status(f: () => void): number {
  try {
    f();
    return 200;
  } catch (e) {
    if (e instanceof ApiError) return e.status;
    throw e;
  }
}

describe("may", () => {
  const actions: AppAction[] = ["read", "write", "exec", "read-secrets"];
  it.each([
    ["admin", admin, "a", [true, true, true, true]],
    ["admin on any app", admin, "zzz", [true, true, true, true]],
    ["maintainer of a", maintainerA, "a", [true, true, true, true]],
    ["maintainer of a on b", maintainerA, "b", [false, false, false, false]],
    ["viewer of a", viewerA, "a", [true, false, false, false]],
    ["viewer of a on b", viewerA, "b", [false, false, false, false]],
    ["sync", sync, "b", [true, false, false, true]],
  ] as const)("%s", (_label, p, app, expected) => {
    expect(actions.map((a) => may(p, a, app))).toEqual(expected);
  });
});

describe("requireOwnName", () => {
  it.each([
    [maintainerA, "a", "a", 200],
    [maintainerA, "a.web.web", "a", 200],
    [maintainerA, "b.web.web", "a", 403],
    [maintainerA, "ab", "a", 403],
    [maintainerA, "a-web", "a", 403],
    [admin, "b.web.web", "a", 200],
  ] as const)("%o names %s in %s: %i", (p, name, ns, expected) => {
    expect(status(() => requireOwnName(p, "podgroup", name, ns))).toBe(expected);
  });
});

describe("host access", () => {
  const policy = hostAccessPolicy(["/var/log/apps", "/data"], ["/tmp/engines/n1/docker.sock"]);
  const pod = (o: { binds?: readonly string[]; network?: string; log?: string }) => ({
    namespace: "a",
    ...(o.network !== undefined ? { network: o.network } : {}),
    containers: [{ ...(o.binds ? { systemVolumes: [...o.binds] } : {}), ...(o.log ? { logConfig: { type: o.log } } : {}) }],
  });

  it("paths are compared segment by segment after normalising", () => {
    expect(isUnder("/data/x", "/data")).toBe(true);
    expect(isUnder("/data", "/data")).toBe(true);
    expect(isUnder("/data2", "/data")).toBe(false);
    expect(hostAccessOf(pod({ binds: ["/data/../etc:/x"] }), policy)).toHaveLength(1);
    expect(hostAccessOf(pod({ binds: ["/data//a/./:/x:ro"] }), policy)).toHaveLength(0);
  });

  it.each([
    ["the app's own directory under an allowed path", { binds: ["/var/log/apps/a:/logs"] }, 200, 200],
    ["below it (a symlink planted there would be followed)", { binds: ["/var/log/apps/a/x:/logs"] }, 403, 200],
    ["another app's directory", { binds: ["/data/b:/d"] }, 403, 200],
    ["the allowed path itself", { binds: ["/data:/d"] }, 403, 200],
    ["/proc/1/root", { binds: ["/proc/1/root/var/run/docker.sock:/s"] }, 403, 403],
    ["dockerd's own containerd", { binds: ["/run/docker/containerd/containerd.sock:/c"] }, 403, 403],
    ["a bind outside", { binds: ["/etc:/host-etc:ro"] }, 403, 200],
    ["the root of the host", { binds: ["/:/host"] }, 403, 403],
    ["the Docker socket", { binds: ["/var/run/docker.sock:/var/run/docker.sock"] }, 403, 403],
    ["/run/docker.sock", { binds: ["/run/docker.sock:/s"] }, 403, 403],
    ["containerd's socket directory", { binds: ["/run/containerd:/c"] }, 403, 403],
    ["the directory holding the socket", { binds: ["/var/run:/r"] }, 403, 403],
    ["an engine socket of -cluster", { binds: ["/tmp/engines:/e"] }, 403, 403],
    ["network host", { network: "host" }, 403, 200],
    ["network container:x", { network: "container:x" }, 403, 200],
    ["network none", { network: "none" }, 200, 200],
    ["network bridge", { network: "bridge" }, 200, 200],
    ["log driver json-file", { log: "json-file" }, 200, 200],
    ["log driver syslog", { log: "syslog" }, 403, 200],
    ["log driver journald", { log: "journald" }, 403, 200],
  ] as const)("%s: maintainer %i, admin %i", (_label, o, forMaintainer, forAdmin) => {
    expect(status(() => requireHostAccess(maintainerA, pod(o), policy, "pod."))).toBe(forMaintainer);
    expect(status(() => requireHostAccess(admin, pod(o), policy, "pod."))).toBe(forAdmin);
  });

  it("the 403 names every field", () => {
    try {
      requireHostAccess(maintainerA, { namespace: "a", network: "host", containers: [{ systemVolumes: ["/data/a:/a", "/etc:/b"] }] }, policy, "pod.");
      expect.unreachable();
    } catch (e) {
      const body = (e as ApiError).body as { message: string; details: { path: string }[]; missing: string };
      expect(body.details.map((d) => d.path)).toEqual(["pod.network", "pod.containers[0].systemVolumes[1]"]);
      expect(body.message).toContain("pod.network");
      expect(body.missing).toMatch(/admin/);
    }
  });
});

describe("requestToken", () => {
  const from = (h: Record<string, string>) => requestToken((n) => h[n]);
  it("reads access-token or Authorization: Bearer", () => {
    expect(from({ "access-token": "t1" })).toBe("t1");
    expect(from({ authorization: "Bearer t2" })).toBe("t2");
    expect(from({ authorization: "bearer t3" })).toBe("t3");
    expect(from({ authorization: "Basic dXNlcjpwYXNz" })).toBeUndefined();
    expect(from({ authorization: "Bearer" })).toBeUndefined();
    expect(from({})).toBeUndefined();
    expect(from({ "access-token": "t1", authorization: "Bearer t2" })).toBe("t1");
  });
});

describe("requireOwnDependencies", () => {
  it("lets a non-admin list only its own app's dependencies", () => {
    expect(status(() => requireOwnDependencies(maintainerA, "a", [{ podName: "a" }, { podName: "a.db" }], "pod."))).toBe(200);
    expect(status(() => requireOwnDependencies(maintainerA, "a", [{ podName: "b.db" }], "pod."))).toBe(403);
    expect(status(() => requireOwnDependencies(maintainerA, "a", [{ podName: "ab" }], "pod."))).toBe(403);
    expect(status(() => requireOwnDependencies(admin, "a", [{ podName: "b.db" }], "pod."))).toBe(200);
  });
});

describe("-auth none answers loopback hosts only (DNS rebinding)", () => {
  it.each([
    ["127.0.0.1:9000", true],
    ["localhost", true],
    ["LOCALHOST:80", true],
    ["[::1]:9000", true],
    ["127.1.2.3", true],
    ["evil.example.com", false],
    ["evil.example.com:9000", false],
    ["127.0.0.1.evil.example.com", false],
    ["0.0.0.0:9000", false],
  ] as const)("%s: %s", (host, ok) => {
    expect(loopbackHostHeader(host)).toBe(ok);
  });
});
