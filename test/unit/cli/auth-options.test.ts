import { describe, expect, it } from "vitest";
import { authFromOptions, checkAuthListener, isLoopbackHost } from "../../../cli/auth-options.ts";
import { UsageError } from "../../../cli/options.ts";

describe("auth options", () => {
  it("reads -auth and -allowed-host-paths", () => {
    expect(authFromOptions({ auth: "token", "allowed-host-paths": " /data/, /var/log/apps " })).toEqual({ mode: "token", allowedHostPaths: ["/data", "/var/log/apps"] });
    expect(() => authFromOptions({ auth: "off" })).toThrow(UsageError);
    expect(() => authFromOptions({ "allowed-host-paths": "data" })).toThrow(/not an absolute path/);
    expect(() => authFromOptions({ "allowed-host-paths": "/" })).toThrow(/every host path/);
  });

  it("allows -auth none only on loopback listeners", () => {
    for (const host of ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"]) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1"]) expect(isLoopbackHost(host), host).toBe(false);
    expect(() => checkAuthListener({ mode: "none", allowedHostPaths: [] }, "127.0.0.1")).not.toThrow();
    expect(() => checkAuthListener({ mode: "none", allowedHostPaths: [] }, "0.0.0.0")).toThrow(/loopback listen address.*every interface/);
    expect(() => checkAuthListener({ mode: "token", allowedHostPaths: [] }, "0.0.0.0")).not.toThrow();
  });
});
