import { describe, expect, it } from "vitest";
import { AuthProxyConfigError, parseAuthProxyConfig } from "../../../api/authproxy/config.ts";

const base = `issuer: https://sso.example.com/realms/corp
upstream: http://127.0.0.1:3000
oauth2_client:
  id: app
  secret: s3cret
`;

function problems(text: string): string[] {
  try {
    parseAuthProxyConfig(text, "conf/config.yaml");
  } catch (e) {
    if (e instanceof AuthProxyConfigError) return e.problems;
    throw e;
  }
  return [];
}

describe("auth proxy config.yaml", () => {
  it("reads the keys of docs/authproxy.md (config.yaml) with their defaults", () => {
    const c = parseAuthProxyConfig(
      `${base}location:
  - match: = /health
    auth_type: none
  - match: /admin
    auth_type: password sms
    groups: true
  - match: ~* \\.(png|jpg)$
`,
      "conf/config.yaml",
    );
    expect(c.issuer).toBe("https://sso.example.com/realms/corp");
    // As written (a trailing slash kept): discovery says which spelling the tokens carry.
    expect(parseAuthProxyConfig(base.replace("realms/corp", "realms/corp/") + "location: []\n", "c.yaml").issuer).toBe("https://sso.example.com/realms/corp/");
    expect(c.upstream).toBe("http://127.0.0.1:3000");
    expect(c.client).toEqual({ id: "app", secret: "s3cret", csrfCookieName: "sso_csrf" });
    expect(c.locations.map((l) => [l.match.modifier, l.match.pattern, l.authTypes, l.groups])).toEqual([
      ["=", "/health", [], false],
      ["", "/admin", ["password", "sms"], true],
      ["~*", "\\.(png|jpg)$", ["password"], false],
    ]);
    expect(c.locations[1]!.where).toBe("conf/config.yaml:9");
  });

  it("takes explicit endpoints, realm, cookie secret, extra auth types", () => {
    const c = parseAuthProxyConfig(
      `${base}  redirect_uri: https://app.example.com/_sso/
  csrf_cookie_name: app_csrf
sso_auth_endpoint: https://sso.example.com/auth
sso_token_endpoint: https://sso.example.com/token
sso_jwks_uri: https://sso.example.com/jwks
realm: corp
cookie_secret: 0123456789abcdef0123456789abcdef
extra_auth_types: [yubikey]
location:
  - match: /
    auth_type: yubikey password
`,
      "c.yaml",
    );
    expect(c.endpoints).toEqual({ authorization: "https://sso.example.com/auth", token: "https://sso.example.com/token", jwks: "https://sso.example.com/jwks" });
    expect(c.realm).toBe("corp");
    expect(c.client.redirectUri).toBe("https://app.example.com/_sso/");
    expect(c.client.csrfCookieName).toBe("app_csrf");
    expect(c.locations[0]!.authTypes).toEqual(["yubikey", "password"]);
  });

  it.each([
    ["groups with auth_type none", `${base}location:\n  - match: /a\n    auth_type: none\n    groups: true\n`, "conf/config.yaml:9: location[0].groups: cannot be true with auth_type: none"],
    ["none combined", `${base}location:\n  - match: /a\n    auth_type: none password\n`, 'conf/config.yaml:8: location[0].auth_type: "none" cannot be combined'],
    ["unknown auth type", `${base}location:\n  - match: /a\n    auth_type: pasword\n`, 'conf/config.yaml:8: location[0].auth_type: unknown login method "pasword"'],
    ["missing match", `${base}location:\n  - auth_type: none\n`, "conf/config.yaml:7: location[0].match: required, but missing"],
    ["bad modifier", `${base}location:\n  - match: "@x /a"\n`, "conf/config.yaml:7: location[0].match:"],
    ["duplicate prefix", `${base}location:\n  - match: /a\n  - match: ^~ /a\n`, 'conf/config.yaml:8: location[1].match: "^~ /a" duplicates the location at conf/config.yaml:7'],
    ["reserved path", `${base}location:\n  - match: ^~ /_sso/x\n`, "conf/config.yaml:7: location[0].match: \"^~ /_sso/x\" is reserved"],
    ["groups not boolean", `${base}location:\n  - match: /a\n    groups: yes please\n`, "conf/config.yaml:8: location[0].groups: must be true or false"],
    ["plain http issuer off loopback", base.replace("https://sso.example.com/realms/corp", "http://sso.example.com") + "location: []\n", "conf/config.yaml:1: issuer: \"http://sso.example.com\" is plain http to another machine"],
    ["upstream with a path", base.replace("http://127.0.0.1:3000", "http://127.0.0.1:3000/app") + "location: []\n", "conf/config.yaml:2: upstream: \"http://127.0.0.1:3000/app\" must be an origin"],
    ["missing client secret", "issuer: https://a.example\nupstream: http://127.0.0.1:1\noauth2_client:\n  id: x\nlocation: []\n", "conf/config.yaml:4: oauth2_client.secret: required, but missing"],
    ["unknown key", `${base}locations: []\n`, "conf/config.yaml:6: locations: unknown key"],
    ["short cookie secret", `${base}cookie_secret: short\nlocation: []\n`, "conf/config.yaml:6: cookie_secret: must be at least 32 characters"],
    ["csrf cookie named sso", `${base}  csrf_cookie_name: sso\nlocation: []\n`, 'conf/config.yaml:6: oauth2_client.csrf_cookie_name: "sso" is the session cookie'],
    ["yaml syntax", `${base}location: [\n`, "conf/config.yaml:"],
    ["a $ in the upstream host (an nginx variable)", base.replace("http://127.0.0.1:3000", "http://$http_x_target") + "location: []\n", "conf/config.yaml:2: upstream: \"http://$http_x_target\": the host may hold only"],
    ["an escaped $ in the upstream host", base.replace("http://127.0.0.1:3000", "http://a%24http_x:8080") + "location: []\n", "conf/config.yaml:2: upstream:"],
    ["a named regex group (an nginx variable)", `${base}location:\n  - match: ~ ^/pub/(?<sso_upstream>[^/]+)\n`, "conf/config.yaml:7: location[0].match:"],
    ["redirect_uri on /", `${base}  redirect_uri: https://app.example.com/\nlocation: []\n`, "conf/config.yaml:1: oauth2_client.redirect_uri: its path cannot be"],
    ["redirect_uri with an escape", `${base}  redirect_uri: https://app.example.com/call%20back\nlocation: []\n`, "conf/config.yaml:1: oauth2_client.redirect_uri:"],
    ["redirect_uri on the proxy's logout", `${base}  redirect_uri: https://app.example.com/_sso/logout\nlocation: []\n`, "conf/config.yaml:1: oauth2_client.redirect_uri:"],
    ["redirect_uri taken by an = location", `${base}  redirect_uri: https://app.example.com/cb\nlocation:\n  - match: = /cb\n`, "conf/config.yaml:1: oauth2_client.redirect_uri: its path \"/cb\" is also the location"],
  ])("refuses %s, naming the key and line", (_what, text, expected) => {
    const found = problems(text);
    expect(found.length, found.join("\n")).toBeGreaterThan(0);
    expect(found.some((p) => p.startsWith(expected)), `${found.join("\n")}\n  expected one starting with: ${expected}`).toBe(true);
  });

  it("lists every problem at once", () => {
    expect(problems("upstream: ftp://x\nlocation:\n  - match: admin\n").length).toBeGreaterThanOrEqual(4);
  });
});
