// The web console's pure pieces: YAML error lines, the list's filter and paging, the CSRF token
// and cookies, and the cookie the gate accepts for a WebSocket upgrade (docs/web-console.md).
import { describe, expect, it } from "vitest";
import { browserSocketToken } from "../../../api/auth/gate.ts";
import { publicUrlOf } from "../../../cli/web-console.ts";
import type { PodGroupWithSpec } from "../../../api/resources/podgroup.ts";
import { age, bytes } from "../../../api/ui/layout.ts";
import { pageOfGroups, pageSize } from "../../../api/ui/pages/podgroups.ts";
import { csrfTokenFor, readCookie, sameSecret, setCookie } from "../../../api/ui/session.ts";
import { parseYamlForm, splitPath } from "../../../api/ui/yaml-lines.ts";

describe("YAML lines of API error paths", () => {
  const text = ["namespace: shop", "containers:", "  - image: busybox", "    memoryLimit: -5", "  - image: other", "    Command: [sh]", "name: web"].join("\n");
  it("finds the line of a nested field, case-insensitively, and of a list item", () => {
    const parsed = parseYamlForm(text);
    if ("syntax" in parsed) throw new Error("parses");
    expect(parsed.lineOf("containers[0].memoryLimit")).toBe(4);
    expect(parsed.lineOf("containers[1].command")).toBe(6);
    expect(parsed.lineOf("containers[1]")).toBe(5);
    expect(parsed.lineOf("name")).toBe(7);
    // A path the document lacks: the deepest part found, or nothing.
    expect(parsed.lineOf("containers[0].env")).toBe(3);
    expect(parsed.lineOf("bogus")).toBeUndefined();
  });
  it("answers a syntax error with its line", () => {
    const parsed = parseYamlForm("a: 1\nb: [unclosed\nc: 3");
    expect("syntax" in parsed && parsed.syntax[0]!.line).toBeGreaterThan(1);
  });
  it("answers an unresolved alias or an alias bomb as a syntax problem, not a throw", () => {
    expect(parseYamlForm("a: *nothing")).toMatchObject({ syntax: [{ line: 1 }] });
    const bomb = ["a: &a [x, x, x, x, x, x, x, x, x]", ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}]`)].join("\n");
    expect("syntax" in parseYamlForm(bomb)).toBe(true);
  });
  it("splits API paths", () => {
    expect(splitPath("pod.containers[12].image")).toEqual(["pod", "containers", 12, "image"]);
  });
});

describe("the PodGroup list's filter and paging", () => {
  const group = (name: string, namespace: string, state: string) => ({ spec: { name, namespace }, state }) as unknown as PodGroupWithSpec;
  const all = Array.from({ length: 120 }, (_, i) => group(`g${String(119 - i).padStart(3, "0")}`, i % 2 ? "odd" : "even", i % 3 ? "running" : "failed"));
  it("sorts by name and cuts pages of 50, the last one short", () => {
    const first = pageOfGroups(all, { q: "", state: "", page: 1 });
    expect(first).toMatchObject({ total: 120, pages: 3, page: 1 });
    expect(first.rows).toHaveLength(pageSize);
    expect(first.rows[0]!.spec.name).toBe("g000");
    const last = pageOfGroups(all, { q: "", state: "", page: 3 });
    expect(last.rows.map((g) => g.spec.name)).toEqual(Array.from({ length: 20 }, (_, i) => `g${100 + i}`));
    // A page past the end shows the last page.
    expect(pageOfGroups(all, { q: "", state: "", page: 99 }).page).toBe(3);
  });
  it("filters on name or app, and state", () => {
    expect(pageOfGroups(all, { q: "G11", state: "", page: 1 }).total).toBe(10);
    expect(pageOfGroups(all, { q: "odd", state: "", page: 1 }).total).toBe(60);
    const failed = pageOfGroups(all, { q: "", state: "failed", page: 1 });
    expect(failed.total).toBe(40);
    expect(failed.rows.every((g) => g.state === "failed")).toBe(true);
    expect(pageOfGroups(all, { q: "nothing", state: "", page: 1 })).toMatchObject({ total: 0, pages: 1, rows: [] });
  });
});

describe("sessions", () => {
  it("gives each token its own CSRF token and compares secrets exactly", () => {
    const a = csrfTokenFor("cst_aaaaaaaaaaaa_x");
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(csrfTokenFor("cst_aaaaaaaaaaaa_x")).toBe(a);
    expect(csrfTokenFor("cst_bbbbbbbbbbbb_x")).not.toBe(a);
    expect(sameSecret(a, a)).toBe(true);
    expect(sameSecret(a, `${a}x`)).toBe(false);
    expect(sameSecret(undefined, a)).toBe(false);
    expect(sameSecret("", "")).toBe(false);
  });
  it("writes cookies with their flags and refuses a value that would inject attributes", () => {
    expect(setCookie("capstan_session", "cst_x", { secure: true, sameSite: "Strict" })).toBe("capstan_session=cst_x; Path=/; HttpOnly; SameSite=Strict; Secure");
    expect(setCookie("s", "", { secure: false, sameSite: "Lax", maxAge: 0, path: "/ui/login" })).toBe("s=; Path=/ui/login; HttpOnly; SameSite=Lax; Max-Age=0");
    expect(() => setCookie("s", "a; Domain=evil", { secure: false, sameSite: "Strict" })).toThrow(/token set/);
    expect(readCookie("a=1; capstan_session=cst_y ; b=2", "capstan_session")).toBe("cst_y");
    expect(readCookie("a=1", "capstan_session")).toBeUndefined();
  });
  it("takes the session cookie for the exec socket only: GET upgrade, this origin, the session's CSRF token", () => {
    const csrf = csrfTokenFor("cst_z");
    const req = (o: { method?: string; path?: string; headers?: Record<string, string>; query?: Record<string, string> }) => ({
      method: o.method ?? "GET",
      path: o.path ?? "/api/podgroups/exec",
      header: (n: string) => ({ upgrade: "websocket", host: "127.0.0.1:9000", cookie: "capstan_session=cst_z", origin: "http://127.0.0.1:9000", ...o.headers })[n],
      query: (n: string) => ({ csrf_token: csrf, ...o.query })[n],
    });
    expect(browserSocketToken(req({}))).toBe("cst_z");
    expect(browserSocketToken(req({ headers: { cookie: "__Host-capstan_session=cst_z" } }))).toBe("cst_z");
    expect(browserSocketToken(req({ headers: { origin: "http://evil.example" } }))).toBeUndefined();
    expect(browserSocketToken(req({ headers: { origin: "" } }))).toBeUndefined();
    expect(browserSocketToken(req({ headers: { upgrade: "h2c" } }))).toBeUndefined();
    expect(browserSocketToken(req({ query: { csrf_token: "x" } }))).toBeUndefined();
    expect(browserSocketToken(req({ query: { csrf_token: csrfTokenFor("cst_other") } }))).toBeUndefined();
    expect(browserSocketToken(req({ path: "/api/podgroups" }))).toBeUndefined();
    expect(browserSocketToken(req({ method: "DELETE" }))).toBeUndefined();
  });
});

describe("-public-url", () => {
  it("takes a scheme and host, https or loopback http, and names what is wrong otherwise", () => {
    expect(publicUrlOf({ "public-url": "https://console.example.com" })?.origin).toBe("https://console.example.com");
    expect(publicUrlOf({ "public-url": "http://127.0.0.1:9000/" })?.origin).toBe("http://127.0.0.1:9000");
    expect(publicUrlOf({})).toBeUndefined();
    expect(() => publicUrlOf({ "public-url": "http://10.0.0.1" })).toThrow(/plain http/);
    expect(() => publicUrlOf({ "public-url": "https://x.example/console" })).toThrow(/scheme and host only/);
    expect(() => publicUrlOf({ "public-url": "ftp://x.example" })).toThrow(/https/);
    expect(() => publicUrlOf({ "public-url": "not a url" })).toThrow(/absolute URL/);
  });
});

describe("formatting", () => {
  it("says ages and sizes for people", () => {
    const now = Date.parse("2026-01-02T03:04:05Z");
    expect(age("2026-01-02T03:04:00Z", now)).toBe("5s");
    expect(age("2026-01-02T02:00:00Z", now)).toBe("1h 4m");
    expect(age("2025-12-30T03:04:05Z", now)).toBe("3d 0h");
    expect(age("", now)).toBe("");
    expect(bytes(16 << 20)).toBe("16 MiB");
    expect(bytes(1536)).toBe("1.5 KiB");
  });
});
