// Differential test of the auth proxy's location matching (docs/authproxy.md#locations) against a
// real nginx: generated configurations and request paths, each sent raw to an nginx whose every
// location answers its own index with $args and $uri, and compared with normalizeRequestTarget +
// LocationTable.match: the same location, the same normalized path, the same query, and a 400
// from nginx exactly where Capstan refuses the target. Targets Capstan refuses on purpose (a
// control character after decoding, which nginx accepts) are left out of the comparison.
//
// Generation is seeded; a failure prints the seed. CAPSTAN_MATCHER_SEED=<n> reruns one, or tries
// another corpus.
import { Agent, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocationTable, normalizeRequestTarget, parseLocationMatch, type LocationMatch } from "../../../api/authproxy/locations.ts";
import { nginxTest, startNginx, type NginxProcess } from "../../helpers/nginx.ts";
import { mulberry32 } from "../../helpers/prng.ts";

const seed = Number(process.env.CAPSTAN_MATCHER_SEED ?? 20261126);


interface Case {
  name: string;
  /** `match` values in config order. */
  config: string[];
  /** Request targets, as sent on the request line (one char per byte). */
  targets: string[];
  /** Write each location into nginx.conf as `location <text>`, unquoted. */
  asWritten?: boolean;
}

// The config of the reference's verified nginx 1.22.1 table, and its priority test.
const referenceConfig = ["= /exact", "/exact", "/", "/admin", "/admin/public", "^~ /static/", "~ \\.php$", "~* \\.(png|jpg)$", "~ ^/admin/.*\\.txt$", "~ ^/API/", "/api/"];
const referenceTargets = [
  "/exact", "/exact?x=1", "/exac%74", "/exact/", "/exactly", "/exact%3F", "/EXACT", "/ADMIN", "/Api/x", "/x/a.PHP",
  "/x/a.PNG", "/x/A.JPG", "/static/a.PNG", "/admin/public/a.txt", "/API/x", "/%41PI/x", "/API%2fx", "/api/x", "//admin",
  "///admin//public///x", "/x/../admin", "/./admin", "/%61dmin", "/%2Fadmin", "/static/%2e%2e/admin", "/static/..%2fadmin",
  "/admin/..%2Fstatic/x", "/..", "/../admin", "/%2e%2e/admin", "/x/a.php%00.txt", "/admin%00", "admin", "*",
  "/%252e%252e/admin", "/admin\\public", "/admin%5cpublic", "/admin;x", "/public/..;/admin", "/x/a.php%0a", "/x/a.php%20",
  "/x/a.php%09", "/x/a.php.", "/x/a.php/", "/admin#frag", "/x#/../admin", "http://evil/admin", "/x/%ff.php", "/x/%C3%A9.PNG",
];
const priorityConfig = ["~ \\.php$", "^~ /a", "/a/b", "~ ^/a/b", "= /a/b/x.php", "/"];
const priorityTargets = ["/a/b/x.php", "/a/b/y.php", "/a/b/z", "/a/c.php", "/ab.php"];

// Prefix and exact paths; some need quoting in nginx.conf (space, ;, {, #) or are non-ASCII.
const prefixWords = [
  "/", "/a", "/a/", "/a/b", "/ab", "/admin", "/admin/", "/ad", "/admin/public", "/static/", "/api", "/api/", "/API",
  "/x.php", "/a%25", "/%", "/é", "/caf\u00e9/", "/a;b", "/a\\b", "/a b", "/{x}", "/a?b", "/a#b", "/..;", "/a.", "/A",
];
// Regex pieces that mean the same in PCRE and JavaScript, each with request-target fragments it
// matches or nearly matches (other case, neighbouring bytes, non-ASCII case pairs, NBSP for \s).
const regexPieces: [string, string[]][] = [
  ["/a", ["/a", "/A"]], ["/admin", ["/admin", "/ADMIN", "/%61dmin"]], ["/API", ["/API", "/api"]], ["/api", ["/api"]],
  ["a", ["a", "A"]], ["b", ["b"]], ["x", ["x", "X"]], ["\\.php", [".php", ".PHP", "%2ephp"]],
  ["\\.(png|jpg)", [".png", ".JPG"]], ["[a-z]+", ["abc", "ABC"]], ["[A-Z]", ["Q", "q"]], ["[0-9]+", ["42"]], [".*", ["", "x%e9"]],
  ["(a|b)", ["b"]], ["/", ["/", "%2f"]], ["\\\\", ["\\", "%5C"]], ["é", ["%C3%A9", "%c3%89", "\xc3\xa9"]],
  ["\\xe9", ["%E9", "%c9", "\xe9"]], ["\\xc3\\xa9", ["\xc3\xa9", "%E3%A9"]], ["[^/]*", ["zz"]], ["\\s", ["%20", "%a0", "%85"]],
  ["\\w+", ["w_1", "%e9", "%aa"]], ["\\W", ["-", "%aa", "%b5"]], [";", [";"]], ["\\.\\.", ["..", "..;"]], ["%", ["%25"]],
  ["\\?", ["%3F"]], ["#", ["%23"]], ["[.]", ["."]], ["(x|y)?", ["y", ""]], ["[\\x80-\\xff]", ["%ff", "%80", "%7e"]],
  ["\\{", ["{"]], ["[ ]", ["%20"]], ["a b", ["a%20b", "A%20B"]], ["\\ b", ["%20b"]], ["\\-", ["-"]], ["[^a-z]", ["Z", "z"]],
];
// Path segments: encodings, dot segments, case variants, raw and encoded high bytes, ; and \.
const segments = [
  "a", "A", "b", "ab", "admin", "ADMIN", "Admin", "ad", "public", "static", "api", "API", "Api", "x.php", "x.PHP", "y.png",
  "Y.JPG", "a.php.", "..", ".", "", "%2e%2e", "%2E", ".%2e", "..%2f", "%2F", "%2f..", "%41", "%61dmin", "%252e%252e", "%25",
  "%2525", "%3F", "%3f", "%23", "%20", "%e9", "%C3%A9", "%c3%89", "%c9", "\xe9", "\xc3\xa9", ";", "..;", "a;b", "\\", "%5c",
  "%5C..", "%a0", "%85", "%zz", "%4", "%00", "%0a", "%09", "%7f", "caf%C3%A9", "{x}", '"', "+", "%2b", "~", "a%3Fb", "%2e",
  "x.php%20", "%ff.php", "%", "a b".replace(" ", "%20"), "%7B", "é".replace("é", "%C3%A9"),
];
const suffixes = ["", "", "", "", "", "", "?q=1", "?x=%zz", "?a#f", "#frag", "#/../admin", "?", "?a/../..", "/"];
const authorities = ["http://h", "http://evil:8080", "HTTPS://Example.COM.", "http://[::1]"];
const oddTargets = ["admin", "*", "http://a_b/x", "http://h#x", "http://a..b/", "http://h", "http://h?x=1", "/a%4/"];

function generate(r: () => number, index: number): Case {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(r() * list.length)] as T;
  const config: string[] = [];
  /** Targets made of the examples of some regex's pieces. */
  const nearRegex: string[] = [];
  const prefixSeen = new Set<string>();
  const exactSeen = new Set<string>();
  const size = 6 + Math.floor(r() * 9);
  while (config.length < size) {
    if (r() < 0.55) {
      const path = pick(prefixWords);
      const kind = r();
      if (kind < 0.2) {
        if (exactSeen.has(path)) continue;
        exactSeen.add(path);
        config.push(`= ${path}`);
      } else {
        // nginx refuses the same prefix twice, plain or ^~.
        if (prefixSeen.has(path)) continue;
        prefixSeen.add(path);
        config.push(kind < 0.45 ? `^~ ${path}` : path);
      }
    } else {
      const anchored = r() < 0.5;
      let re = anchored ? "^" : "";
      let example = "";
      const n = 1 + Math.floor(r() * 3);
      for (let i = 0; i < n; i++) {
        const [piece, examples] = pick(regexPieces);
        re += piece;
        example += pick(examples);
      }
      if (r() < 0.4) re += "$";
      config.push(`${r() < 0.5 ? "~" : "~*"} ${re}`);
      nearRegex.push(anchored && example.startsWith("/") ? example : `/${pick(segments)}${example}`);
    }
  }

  // Percent-encode some bytes (hex digits in either case) and always the ones a request line
  // cannot carry raw.
  const encodeSome = (s: string) =>
    [...Buffer.from(s, "utf8")]
      .map((b) => {
        if (b > 0x20 && b !== 0x7f && (b === 0x2f || r() >= 0.25)) return String.fromCharCode(b);
        const hex = b.toString(16).padStart(2, "0");
        return `%${r() < 0.5 ? hex.toUpperCase() : hex}`;
      })
      .join("");
  const targets = new Set<string>();
  while (targets.size < 200) {
    const roll = r();
    if (roll < 0.03) {
      targets.add(pick(oddTargets));
      continue;
    }
    let path: string;
    if (roll < 0.25 && nearRegex.length > 0) {
      path = pick(nearRegex);
    } else if (roll < 0.45) {
      // Near a configured prefix or exact path: the same bytes, partly percent-encoded, plus a tail.
      const l = pick(config).replace(/^(=|\^~|~\*?) /, "");
      path = (l.startsWith("/") ? encodeSome(l) : "/") + (r() < 0.6 ? pick(segments) : "");
    } else {
      const n = 1 + Math.floor(r() * 4);
      const parts: string[] = [];
      for (let i = 0; i < n; i++) parts.push(pick(segments));
      path = (r() < 0.15 ? "//" : "/") + parts.join(r() < 0.9 ? "/" : "//");
    }
    if (r() < 0.08) path = pick(authorities) + path;
    targets.add(path + pick(suffixes));
  }
  return { name: `generated #${index}`, config, targets: [...targets] };
}

// nginx's one-word forms, written into nginx.conf as they are written in config.yaml.
const oneWordConfig = ["=/x", "^~/s", "~\\.php$", "~*\\.png$", "/"];
const oneWordTargets = ["/x", "/xy", "/s/a.php", "/a.php", "/a.PNG", "/a.png", "/=/x", "/~x"];

const cases: Case[] = [
  { name: "reference", config: referenceConfig, targets: referenceTargets },
  { name: "priority", config: priorityConfig, targets: priorityTargets },
  { name: "one-word forms", config: oneWordConfig, targets: oneWordTargets, asWritten: true },
];
{
  const r = mulberry32(seed);
  for (let i = 1; i <= 8; i++) cases.push(generate(r, i));
}

/** nginx.conf text for one location: the name double-quoted, with \ and " escaped (nginx unescapes both inside quotes). */
const quote = (s: string) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
const answer = (label: string) => `{ return 200 "L=${label}\\n$args\\n$uri"; }`;

function serverBlock(matches: LocationMatch[], asWritten = false): string {
  const lines = matches.map((m, i) => `    location ${asWritten ? m.text : `${m.modifier} ${quote(m.pattern)}`} ${answer(String(i))}`);
  // Capstan's caller handles "no location" as an implicit final "/"; nginx gets it spelled out,
  // unless the config has its own "/" (a second one would be a duplicate).
  if (!matches.some((m) => (m.modifier === "" || m.modifier === "^~") && m.pattern === "/")) lines.push(`    location / ${answer("none")}`);
  return lines.join("\n");
}

interface Answer {
  status: number;
  body: string;
}

function send(agent: Agent, port: number, target: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // http.request writes the path as given (latin1), without normalising it.
    const req = request({ agent, host: "127.0.0.1", port, path: target, headers: { host: "localhost" } }, (res) => {
      res.setEncoding("latin1");
      let body = "";
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${JSON.stringify(target)}`)));
    req.on("error", reject);
    req.end();
  });
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

const show = (s: string) => JSON.stringify(s);

describe(`location matching against nginx (seed ${seed})`, () => {
  const servers: NginxProcess[] = [];
  const parsed = new Map<Case, LocationMatch[]>();

  beforeAll(async () => {
    for (const c of cases) {
      parsed.set(
        c,
        c.config.map((text) => {
          const r = parseLocationMatch(text);
          if (!r.ok) throw new Error(`seed ${seed}, ${c.name}: ${show(text)} refused: ${r.error}`);
          return r.value;
        }),
      );
    }
    servers.push(...(await Promise.all(cases.map((c) => startNginx(serverBlock(parsed.get(c) as LocationMatch[], c.asWritten))))));
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it("refuses PCRE-only regexes that nginx accepts, and what neither accepts", async () => {
    const pcreOnly = ["(?P<n>a)", "\\Aadmin", "admin\\z", "a++", "(?>a)", "[[:alpha:]]", "a{,3}", "\\p{L}", "(?i)admin"];
    for (const re of pcreOnly) {
      const nginx = await nginxTest(`location ~ ${quote(re)} { return 204; }`);
      expect(nginx, re).toEqual({ ok: true, output: "" });
      expect(parseLocationMatch(`~ ${re}`), re).toMatchObject({ ok: false });
    }
    for (const re of ["\\u0041", "a(", "a\\"]) {
      const nginx = await nginxTest(`location ~ ${quote(re)} { return 204; }`);
      expect(nginx.ok, re).toBe(false);
      expect(nginx.output, re).toContain("pcre2_compile() failed");
      expect(parseLocationMatch(`~ ${re}`), re).toMatchObject({ ok: false });
    }
  });

  it("chooses nginx's location, path and query for every target, and refuses what nginx refuses", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const mismatches: string[] = [];
    const tally = { compared: 0, refusedBoth: 0, capstanOnly: 0, none: 0, regex: 0, locations: new Set<string>() };
    try {
      for (const [k, c] of cases.entries()) {
        const server = servers[k] as NginxProcess;
        const matches = parsed.get(c) as LocationMatch[];
        const table = new LocationTable(matches);
        const answers = await mapLimit(c.targets, 8, (t) => send(agent, server.port, t));
        c.targets.forEach((target, i) => {
          const got = answers[i] as Answer;
          const ours = normalizeRequestTarget(target);
          const where = `${c.name}: ${show(target)}`;
          if (!ours.ok && ours.error.includes("control character")) {
            // Refused on purpose; nginx takes it.
            tally.capstanOnly++;
            if (got.status !== 200) mismatches.push(`${where}: Capstan refuses a control character, nginx answers ${got.status}`);
            return;
          }
          tally.compared++;
          if (got.status === 400) {
            tally.refusedBoth++;
            if (ours.ok) mismatches.push(`${where}: nginx 400, Capstan path ${show(ours.path)}`);
            return;
          }
          const m = /^L=([^\n]*)\n([^\n]*)\n([\s\S]*)$/.exec(got.body);
          if (got.status !== 200 || !m) return void mismatches.push(`${where}: nginx ${got.status} ${show(got.body.slice(0, 80))}`);
          const [, label, args, uri] = m as unknown as [string, string, string, string];
          if (!ours.ok) return void mismatches.push(`${where}: nginx L=${label} uri ${show(uri)}, Capstan refuses: ${ours.error}`);
          const index = table.match(ours.path);
          const mine = index === undefined ? "none" : String(index);
          const name = (l: string) => (l === "none" ? "none" : show(c.config[Number(l)] as string));
          if (mine !== label) mismatches.push(`${where}: nginx ${name(label)}, Capstan ${name(mine)} (path ${show(ours.path)})`);
          if (ours.path !== uri) mismatches.push(`${where}: nginx uri ${show(uri)}, Capstan path ${show(ours.path)}`);
          if (ours.query !== args) mismatches.push(`${where}: nginx args ${show(args)}, Capstan query ${show(ours.query)}`);
          if (label === "none") tally.none++;
          else {
            tally.locations.add(`${c.name}/${label}`);
            if (c.config[Number(label)]?.startsWith("~")) tally.regex++;
          }
        });
      }
    } finally {
      agent.destroy();
    }
    const configs = cases.map((c) => `  ${c.name}: ${c.config.map(show).join(", ")}`).join("\n");
    expect(
      mismatches,
      `seed ${seed} (rerun with CAPSTAN_MATCHER_SEED=${seed}); ${mismatches.length} mismatches:\n${mismatches.slice(0, 40).join("\n")}\nconfigs:\n${configs}`,
    ).toEqual([]);
    // The corpus exercised what it is meant to: enough targets, refusals, regex hits, fallthroughs.
    expect(tally.compared, `seed ${seed}`).toBeGreaterThanOrEqual(500);
    expect(tally.refusedBoth, `seed ${seed}`).toBeGreaterThanOrEqual(20);
    expect(tally.capstanOnly, `seed ${seed}`).toBeGreaterThanOrEqual(5);
    expect(tally.regex, `seed ${seed}`).toBeGreaterThanOrEqual(20);
    expect(tally.none, `seed ${seed}`).toBeGreaterThanOrEqual(20);
    expect(tally.locations.size, `seed ${seed}`).toBeGreaterThanOrEqual(30);
    console.log(`seed ${seed}: ${tally.compared} targets compared over ${cases.length} configs, ${tally.refusedBoth} refused by both, ${tally.capstanOnly} refused by Capstan only, ${tally.locations.size} distinct locations chosen`);
  });
});
