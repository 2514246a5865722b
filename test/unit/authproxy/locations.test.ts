// nginx location matching (docs/authproxy.md#locations): every row of the nginx 1.22.1 results the
// design was checked against, nginx's request-target normalisation edge by edge, the re-escaped
// forward path, and the `match` syntax. test/integration/authproxy/nginx-matcher.test.ts compares
// the same code with a running nginx.
import { describe, expect, it } from "vitest";
import { LocationTable, normalizeRequestTarget, parseLocationMatch, type LocationMatch } from "../../../api/authproxy/locations.ts";

function parse(text: string): LocationMatch {
  const r = parseLocationMatch(text);
  if (!r.ok) throw new Error(`${text}: ${r.error}`);
  return r.value;
}

/** The location text nginx would pick for `target`, "none", or "400" when the target is refused. */
function chooser(config: string[]): (target: string) => string {
  const table = new LocationTable(config.map(parse));
  return (target) => {
    const r = normalizeRequestTarget(target);
    if (!r.ok) return "400";
    const i = table.match(r.path);
    return i === undefined ? "none" : (config[i] as string);
  };
}

const bin = (s: string) => Buffer.from(s, "utf8").toString("latin1");

describe("nginx 1.22.1 results (reference table)", () => {
  const config = ["= /exact", "/exact", "/", "/admin", "/admin/public", "^~ /static/", "~ \\.php$", "~* \\.(png|jpg)$", "~ ^/admin/.*\\.txt$", "~ ^/API/", "/api/"];
  const choose = chooser(config);
  // [request target, location nginx chose (400 = refused), $uri nginx matched on when it says so]
  const rows: [string, string, string?][] = [
    ["/exact", "= /exact"],
    ["/exact?x=1", "= /exact"],
    ["/exac%74", "= /exact", "/exact"],
    ["/exact/", "/exact"],
    ["/exactly", "/exact"],
    ["/exact%3F", "/exact", "/exact?"],
    ["/EXACT", "/"],
    ["/ADMIN", "/"],
    ["/Api/x", "/"],
    ["/x/a.PHP", "/"],
    ["/x/a.PNG", "~* \\.(png|jpg)$"],
    ["/x/A.JPG", "~* \\.(png|jpg)$"],
    ["/static/a.PNG", "^~ /static/"],
    ["/admin/public/a.txt", "~ ^/admin/.*\\.txt$"],
    ["/API/x", "~ ^/API/"],
    ["/%41PI/x", "~ ^/API/"],
    ["/API%2fx", "~ ^/API/", "/API/x"],
    ["/api/x", "/api/"],
    ["//admin", "/admin"],
    ["///admin//public///x", "/admin/public", "/admin/public/x"],
    ["/x/../admin", "/admin", "/admin"],
    ["/./admin", "/admin", "/admin"],
    ["/%61dmin", "/admin"],
    ["/%2Fadmin", "/admin", "/admin"],
    ["/static/%2e%2e/admin", "/admin", "/admin"],
    ["/static/..%2fadmin", "/admin", "/admin"],
    ["/admin/..%2Fstatic/x", "^~ /static/", "/static/x"],
    ["/..", "400"],
    ["/../admin", "400"],
    ["/%2e%2e/admin", "400"],
    ["/x/a.php%00.txt", "400"],
    ["/admin%00", "400"],
    ["admin", "400"],
    ["*", "400"],
    ["/%252e%252e/admin", "/", "/%2e%2e/admin"],
    ["/admin\\public", "/admin"],
    ["/admin%5cpublic", "/admin", "/admin\\public"],
    ["/admin;x", "/admin"],
    ["/public/..;/admin", "/", "/public/..;/admin"],
    ["/x/a.php%20", "/"],
    ["/x/a.php.", "/"],
    ["/x/a.php/", "/"],
    ["/admin#frag", "/admin", "/admin"],
    ["/x#/../admin", "/", "/x"],
    ["http://evil/admin", "/admin", "/admin"],
    ["/x/%ff.php", "~ \\.php$", "/x/\xff.php"],
    ["/x/%C3%A9.PNG", "~* \\.(png|jpg)$", "/x/\xc3\xa9.PNG"],
  ];
  it.each(rows)("%s -> %s", (target, location, uri) => {
    expect(choose(target)).toBe(location);
    if (uri !== undefined) expect(normalizeRequestTarget(target)).toMatchObject({ ok: true, path: uri });
  });

  // nginx takes these (a.php%0a by `~ \.php$`: PCRE's $ matches before a final newline; a.php%09
  // by "/"); Capstan refuses every control character on purpose.
  it.each(["/x/a.php%0a", "/x/a.php%09"])("%s: refused by Capstan, where nginx matches", (target) => {
    expect(normalizeRequestTarget(target)).toEqual({ ok: false, error: expect.stringContaining("control character") });
  });

  it("priority: a longer plain prefix lets regexes run although a shorter ^~ matches", () => {
    const choose = chooser(["~ \\.php$", "^~ /a", "/a/b", "~ ^/a/b", "= /a/b/x.php", "/"]);
    expect(choose("/a/b/x.php")).toBe("= /a/b/x.php");
    expect(choose("/a/b/y.php")).toBe("~ \\.php$");
    expect(choose("/a/b/z")).toBe("~ ^/a/b");
    expect(choose("/a/c.php")).toBe("^~ /a");
    expect(choose("/ab.php")).toBe("^~ /a");
  });
});

describe("normalizeRequestTarget", () => {
  const ok = (target: string, path: string, query = "") =>
    expect(normalizeRequestTarget(target), target).toMatchObject({ ok: true, path, query });
  const refused = (target: string, why: string) =>
    expect(normalizeRequestTarget(target), target).toEqual({ ok: false, error: expect.stringContaining(why) });

  it("takes absolute-form as nginx does, ignoring the host", () => {
    ok("http://evil/admin", "/admin");
    ok("https://evil:8443/a/../b?x=1", "/b", "x=1");
    ok("HTTP://EVIL/x", "/x");
    ok("foo+bar.x-1://h/x", "/x"); // any scheme nginx's parser accepts
    ok("http://h", "/");
    ok("http://h:80", "/");
    ok("http://h?x", "/", "x");
    ok("http://h:/x", "/x");
    ok("http://a./x", "/x"); // one trailing dot is dropped from the host
    ok("http://[::1]/x", "/x");
    ok("http://[::1]:8080/x", "/x");
    refused("http://h#x", "authority");
    refused("http://a_b/x", "authority");
    refused("http://user@h/x", "authority");
    refused("http://h:8x/", "authority");
    refused("http:///x", "invalid host");
    refused("http://a..b/x", "invalid host");
    refused("http://./x", "invalid host");
    refused("http://[1..2]/x", "invalid host");
    refused("http://[::1/x", "IP literal");
    refused("http:/x", "must be a path");
    refused("1http://h/x", "must be a path");
    refused("admin", "must be a path");
    refused("*", "must be a path");
    refused("", "empty");
  });

  it("ends the path at the first ? or #; the query stops at #", () => {
    ok("/a?b#c", "/a", "b");
    ok("/a#b?c", "/a", "");
    ok("/a%20b?x#y", "/a b", "x");
    ok("/a?", "/a", "");
    ok("/a?x%zz", "/a", "x%zz"); // the query is not decoded
    ok("/a?x/../..", "/a", "x/../..");
    ok("/a/.?x", "/a/", "x");
    ok("/a/..?x", "/", "x");
    ok("/a/..#x", "/");
  });

  it("decodes once; a decoded / or . acts as one, a decoded % # ? is data", () => {
    ok("/%2Fadmin", "/admin");
    ok("/a%2f%2F/b", "/a/b");
    ok("/a/%2f/../b", "/b");
    ok("/a/%2e%2e%2fx/../y", "/y");
    ok("/a/b/.%2e", "/a/");
    ok("/a/b/%2e", "/a/b/");
    ok("/a/%2E%2E/b", "/b");
    ok("/%252e%252e/admin", "/%2e%2e/admin");
    ok("/%25%23%3f%3F", "/%#??");
    ok("/a%2bb", "/a+b");
    ok("/a+b", "/a+b");
    ok("/%41%42%63", "/ABc");
  });

  it("resolves dot segments and merges slashes", () => {
    ok("/.", "/");
    ok("/a/.", "/a/");
    ok("/a/./b", "/a/b");
    ok("/a/b/../../c", "/c");
    ok("/a//../b", "/b");
    ok("/a/..", "/");
    ok("/a/...", "/a/...");
    ok("/a/..b/.c", "/a/..b/.c");
    ok("//", "/");
    ok("/a/b/", "/a/b/");
  });

  it("refuses a path above the root", () => {
    refused("/..", "above the root");
    refused("/../admin", "above the root");
    refused("/%2e%2e", "above the root");
    refused("/a%2f..%2f..", "above the root");
    refused("/a/%2e%2e%2f..", "above the root");
    refused("/a/./b/../../..", "above the root");
    refused("/..?x", "above the root");
    refused("/..#x", "above the root");
  });

  it("refuses NUL, control characters and invalid percent sequences", () => {
    refused("/admin%00", "NUL");
    refused("/a%0ab", "control character");
    refused("/a%0D", "control character");
    refused("/a%1f", "control character");
    refused("/a%7f", "control character");
    refused("/a\x01", "control character");
    refused("/a?x\x7f", "control character");
    refused("/a b", "space");
    refused("/a%zz", "percent");
    refused("/a%4", "percent");
    refused("/a%", "percent");
    refused("/a%?x", "percent");
    refused("/a%4?x", "percent");
    refused("/a%4#x", "percent");
    refused("/\u0100", "not a byte");
  });

  it("keeps raw bytes, backslash and ; as ordinary bytes", () => {
    ok("/\xe9\xff", "/\xe9\xff");
    ok("/caf%C3%A9", bin("/café"));
    ok("/a\\..\\b", "/a\\..\\b");
    ok("/a\\../b", "/a\\../b");
    ok("/a;b/..;/c", "/a;b/..;/c");
    ok('/"{|}`<>^', '/"{|}`<>^');
  });

  it("re-escapes the forward path", () => {
    const fwd = (target: string) => {
      const r = normalizeRequestTarget(target);
      if (!r.ok) throw new Error(r.error);
      return r.forwardPath;
    };
    expect(fwd("/a%2fb//c/../d")).toBe("/a/b/d");
    expect(fwd("/%25%20%3F%23")).toBe("/%25%20%3F%23");
    expect(fwd("/%252e")).toBe("/%252e");
    expect(fwd("/caf%c3%a9/%ff")).toBe("/caf%C3%A9/%FF");
    expect(fwd("/\xe9")).toBe("/%E9");
    expect(fwd("/a\\b%5C")).toBe("/a%5Cb%5C");
    expect(fwd('/"<>{|}^`[]')).toBe("/%22%3C%3E%7B%7C%7D%5E%60%5B%5D");
    expect(fwd("/AZaz09-._~!$&'()*+,;=:@")).toBe("/AZaz09-._~!$&'()*+,%3B=:@");
    // ";" is escaped: a servlet container would cut "..;" to ".." and climb out of the matched location.
    expect(fwd("/public/..;/admin")).toBe("/public/..%3B/admin");
    expect(fwd("/p?q=%20#f")).toBe("/p");
  });
});

describe("parseLocationMatch", () => {
  it.each([
    ["/admin", "", "/admin"],
    ["= /exact", "=", "/exact"],
    ["^~ /static/", "^~", "/static/"],
    ["~ \\.php$", "~", "\\.php$"],
    ["~* \\.(png|jpg)$", "~*", "\\.(png|jpg)$"],
    ["  =\t /x  ", "=", "/x"],
    ["~ ^/a b$", "~", "^/a b$"],
    ["/a b", "", "/a b"],
    ["~ \\\\$", "~", "\\\\$"], // an escaped final backslash is fine in a regex
    // nginx's one-word forms (nginx -t accepts them)
    ["=/x", "=", "/x"],
    ["^~/s", "^~", "/s"],
    ["~\\.php$", "~", "\\.php$"],
    ["~*\\.png$", "~*", "\\.png$"],
  ])("%j", (text, modifier, pattern) => {
    expect(parseLocationMatch(text)).toEqual({ ok: true, value: { modifier, pattern, text } });
  });

  it.each([
    ["", "empty"],
    ["   ", "empty"],
    ["=", "nothing after"],
    ["~ ", "nothing after"],
    ["^~\t", "nothing after"],
    ["=~ /x", 'unknown modifier "=~"'],
    ["~** x", 'unknown modifier "~**"'],
    ["@named", "named location"],
    ["admin", 'must start with "/"'],
    ["= admin", 'must start with "/"'],
    ["^~ *", 'must start with "/"'],
    ["/a\tb", "control character"],
    ["~ a\u0000", "control character"],
    ['/a"b', "double quote"],
    ['~ a"', "double quote"],
    ["/a\\", "ends with a backslash"],
    ["= /a\\", "ends with a backslash"],
    ["~ a\\", "ends with a backslash"],
    ["~ a\\\\\\", "ends with a backslash"],
    ["~ (?P<n>a)", "JavaScript-compatible"],
    ["~ (?i)admin", "JavaScript-compatible"],
    ["~ \\Aadmin", "JavaScript-compatible"],
    ["~ admin\\z", "JavaScript-compatible"],
    ["~ admin\\Z", "JavaScript-compatible"],
    ["~ a++", "JavaScript-compatible"],
    ["~ (?>a)", "JavaScript-compatible"],
    ["~ a{,3}", "JavaScript-compatible"],
    ["~ [[:alpha:]]", "POSIX"],
    ["~ []a]", "first in a class"],
    ["~ [^]a]", "first in a class"],
    ["~ (a)\\1", "backreferences"],
    ["~ (?<n>a)\\k<n>", "backreferences"],
    ["~ \\u0041", "\\u escapes"],
    ["~ \\x{41}", "two hex digits"],
    ["~ \\p{L}", "Unicode property"],
    ["~ \\v", "vertical"],
    ["~ \\012", "octal"],
    ["~ (unclosed", "JavaScript-compatible"],
  ])("%j is refused: %s", (text, why) => {
    const r = parseLocationMatch(text);
    expect(r).toEqual({ ok: false, error: expect.stringContaining(why) });
  });
});

describe("LocationTable", () => {
  const pick = (config: string[], path: string) => {
    const i = new LocationTable(config.map(parse)).match(path);
    return i === undefined ? "none" : config[i];
  };

  it("answers undefined when nothing matches", () => {
    expect(pick(["/admin", "~ \\.php$", "= /x"], "/public")).toBe("none");
    expect(pick([], "/")).toBe("none");
  });

  it("compares prefixes byte-wise and case-sensitively", () => {
    expect(pick(["/admin"], "/adminx")).toBe("/admin");
    expect(pick(["/admin"], "/Admin")).toBe("none");
    expect(pick(["/admin", "/ad"], "/adm")).toBe("/ad");
    expect(pick(["/café"], bin("/café/x"))).toBe("/café");
    expect(pick(["/café"], "/caf\xe9")).toBe("none");
  });

  it("takes the first of duplicates, and = /x beside /x", () => {
    expect(pick(["/x", "^~ /x", "~ x"], "/x/y")).toBe("~ x");
    expect(pick(["^~ /x", "/x", "~ x"], "/x/y")).toBe("^~ /x");
    const config = ["= /x", "/x", "= /x"];
    const t = new LocationTable(config.map(parse));
    expect(t.match("/x")).toBe(0);
    expect(t.match("/xy")).toBe(1);
  });

  it("tries regexes in config order, only after the exact and ^~ checks", () => {
    expect(pick(["~ b", "~ a"], "/ab")).toBe("~ b");
    expect(pick(["~ a", "~ b"], "/ab")).toBe("~ a");
    expect(pick(["~ a", "^~ /a"], "/ab")).toBe("^~ /a");
    expect(pick(["~ a", "^~ /a", "/ab"], "/ab")).toBe("~ a");
    expect(pick(["~ a", "= /ab"], "/ab")).toBe("= /ab");
  });

  it("folds case for ~* in ASCII only, as nginx's PCRE does on bytes", () => {
    expect(pick(["~* ^/admin$"], "/ADMIN")).toBe("~* ^/admin$");
    expect(pick(["~ ^/admin$"], "/ADMIN")).toBe("none");
    // é is C3 A9 and É is C3 89; Ã (C3) and ã (E3) are not folded either
    expect(pick(["~* ^/é$"], bin("/é"))).toBe("~* ^/é$");
    expect(pick(["~* ^/é$"], bin("/É"))).toBe("none");
    expect(pick(["~* ^/\\xc3"], "/\xe3")).toBe("none");
    expect(pick(["~* ^/x\\xe9$"], "/X\xe9")).toBe("~* ^/x\\xe9$");
    expect(pick(["~* ^/x\\xe9$"], "/x\xc9")).toBe("none");
  });

  it("reads regex bytes as nginx does: UTF-8 literals, \\xHH, classes, ASCII-only \\s \\w", () => {
    expect(pick(["~ ^/caf\\xc3\\xa9$"], bin("/café"))).toBe("~ ^/caf\\xc3\\xa9$");
    expect(pick(["~ [\\x80-\\xff]"], "/a\x80")).toBe("~ [\\x80-\\xff]");
    expect(pick(["~ [\\x80-\\xff]"], "/a\x7e")).toBe("none");
    expect(pick(["~ ^/[^a]$"], "/\xff")).toBe("~ ^/[^a]$");
    expect(pick(["~ ^/.$"], "/\xa0")).toBe("~ ^/.$");
    expect(pick(["~ \\s"], "/\xa0")).toBe("none");
    expect(pick(["~ \\s"], "/a b")).toBe("~ \\s");
    expect(pick(["~ ^/\\w$"], "/\xe9")).toBe("none");
    expect(pick(["~ ^/\\W$"], "/\xaa")).toBe("~ ^/\\W$");
    expect(pick(["~ ^/[é]$"], "/\xc3")).toBe("~ ^/[é]$"); // a class of the two bytes
  });

  it("keeps PCRE's escaped punctuation literal", () => {
    expect(pick(["~ ^/a\\-b\\#c\\;d\\ e$"], "/a-b#c;d e")).toBe("~ ^/a\\-b\\#c\\;d\\ e$");
    expect(pick(["~ ^/[\\-]$"], "/-")).toBe("~ ^/[\\-]$");
    expect(pick(["~ \\\\"], "/a\\b")).toBe("~ \\\\");
    expect(pick(["~ \\/b"], "/a/b")).toBe("~ \\/b");
  });

  it("refuses a location parseLocationMatch would refuse", () => {
    expect(() => new LocationTable([{ modifier: "~", pattern: "\\A", text: "~ \\A" }])).toThrow(/JavaScript-compatible/);
    expect(() => new LocationTable([{ modifier: "", pattern: "admin", text: "admin" }])).toThrow(/start with/);
  });
});
