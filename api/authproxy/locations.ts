// nginx's location matching, reproduced exactly (docs/authproxy.md#locations): the request target
// is normalised as nginx 1.22's request-line and complex-URI parsers do, and the location is chosen
// by nginx's rules: `=` exact, else the longest plain or `^~` prefix (a `^~` one stops there), else
// the first regex in config order, else that longest prefix. A differential test checks both halves
// against a real nginx on generated paths and configurations.
//
// Paths are "binary" strings: one char per byte (codes 0-255), as nginx compares bytes. Config
// patterns are ordinary strings; nginx reads the config file as UTF-8 bytes, so a non-ASCII
// character in a pattern stands for its UTF-8 bytes here too.
//
// Regexes are JavaScript regular expressions that must mean what nginx's PCRE makes of the same
// text. nginx runs PCRE without UTF mode, on bytes, with ASCII-only case folding and ASCII-only
// \s \w \d (checked against nginx: `~* é` does not take `/%C3%89`, `\s` does not take `%A0` or
// `%85`). A JavaScript regex over the latin1 string would differ on bytes 0x80-0xFF (`/é/i` takes
// "É"; `\s` takes U+00A0), so both the pattern and the path carry each such byte as the
// private-use character U+E000+byte, which has no case and is neither space nor word. The regex
// is compiled with the `u` flag so that escapes JavaScript would otherwise read as a plain letter
// (`\A`, `\z`, `\h`, ... which PCRE reads as anchors or classes) are errors rather than silent
// differences; PCRE's escaped punctuation (`\-`, `\#`) stays literal.

export type LocationModifier = "=" | "^~" | "~" | "~*" | ""; // "" = plain prefix

export interface LocationMatch {
  modifier: LocationModifier;
  /** The URI or regex text as written after the modifier (e.g. "/admin", "\\.php$"). */
  pattern: string;
  /** The whole `match` value as written in config, for messages and the nginx generator. */
  text: string;
}

type Result<T> = { ok: true; value: T } | { ok: false; error: string };

const modifiers = new Set<string>(["=", "^~", "~", "~*"]);
// eslint-disable-next-line no-control-regex
const controlChar = /[\x00-\x1f\x7f]/;

/**
 * Parse a config `match` value: `[= | ^~ | ~ | ~*] pattern`, the modifier and the pattern separated
 * by spaces or tabs. nginx's one-word forms (`=/x`, `^~/static/`, `~\.php$`, `~*\.png$`) are
 * accepted too, as nginx accepts them. Pure: the caller checks duplicates and reserved paths.
 *
 * The nginx generator writes the pattern double-quoted, with `\` written as `\\` and `"` as `\"`:
 * nginx's config reader turns `\\`, `\"`, `\'`, `\t`, `\n` and `\r` into one character even inside
 * quotes, so a pattern copied as written changes meaning when it holds `\\` (a regex's literal
 * backslash becomes an escape of the next character, `\\b` a word boundary). `"` anywhere and a
 * final `\` in a path are refused outright, as they break naive quoting (`\x22` says `"` in a
 * regex).
 */
export function parseLocationMatch(text: string): Result<LocationMatch> {
  const t = text.replace(/^[ \t]+|[ \t]+$/g, "");
  if (t === "") return { ok: false, error: "empty: expected [= | ^~ | ~ | ~*] /uri" };
  const space = t.search(/[ \t]/);
  const first = space < 0 ? t : t.slice(0, space);
  let modifier: LocationModifier;
  let pattern: string;
  if (modifiers.has(first)) {
    modifier = first as LocationModifier;
    pattern = space < 0 ? "" : t.slice(space).replace(/^[ \t]+/, "");
    if (pattern === "") return { ok: false, error: `nothing after the modifier "${first}": expected a ${first.startsWith("~") ? "regular expression" : "path"}` };
  } else if (space < 0 && /^(=|\^~|~\*?)/.test(first)) {
    // nginx's one-word forms, parsed as nginx does: "=" then the path, "^~" then the path,
    // "~*" or "~" then the regex.
    const m = /^(=|\^~|~\*?)(.*)$/s.exec(first) as RegExpExecArray;
    modifier = m[1] as LocationModifier;
    pattern = m[2] as string;
    if (pattern === "") return { ok: false, error: `nothing after the modifier "${modifier}"` };
  } else if (/^[=~^@]/.test(first)) {
    if (first.startsWith("@")) return { ok: false, error: `"${first}" is a named location, which never matches a request path` };
    return { ok: false, error: `unknown modifier "${first}": expected =, ^~, ~ or ~*, then a space, then the pattern` };
  } else {
    modifier = "";
    pattern = t;
  }

  if (controlChar.test(pattern)) return { ok: false, error: "the pattern holds a control character" };
  if (pattern.includes('"')) {
    return { ok: false, error: `the pattern holds a double quote, which the nginx config cannot carry safely${modifier.startsWith("~") ? " (write \\x22 instead)" : ""}` };
  }
  if (modifier === "~" || modifier === "~*") {
    const compiled = compileRegex(pattern, modifier === "~*");
    if (!compiled.ok) return compiled;
  } else if (!pattern.startsWith("/")) {
    return { ok: false, error: `"${pattern}" must start with "/" (a ${modifier === "=" ? "exact" : "prefix"} location compares the request path, which always does)` };
  } else if (pattern.endsWith("\\")) {
    // A regex's final backslash is either escaped (fine) or dangling (refused as a regex).
    return { ok: false, error: "the pattern ends with a backslash" };
  }
  return { ok: true, value: { modifier, pattern, text } };
}

// ---------------------------------------------------------------------------------------------
// Regexes

const puaBase = 0xe000;
const highByte = /[\x80-\xff]/;
const highBytes = /[\x80-\xff]/g;
const toPuaChar = (c: string) => String.fromCharCode(puaBase + c.charCodeAt(0));
const puaEscape = (byte: number) => `\\u${(puaBase + byte).toString(16)}`;
/** The path as the regexes see it: bytes 0x80-0xFF as U+E080-U+E0FF. */
const regexSubject = (path: string) => (highByte.test(path) ? path.replace(highBytes, toPuaChar) : path);
const utf8Escapes = (s: string) => [...Buffer.from(s, "utf8")].map(puaEscape).join("");

const unsupported =
  "must be a JavaScript-compatible regular expression (PCRE-only syntax such as (?P<name>...), (?i), \\A, \\z, \\Z, \\h, " +
  "possessive quantifiers (a++), atomic groups, POSIX classes ([[:alpha:]]) and a{,n} is not supported)";
const hex = /^[0-9a-fA-F]{2}$/;
// Escapes JavaScript and PCRE read the same way over this module's subject strings.
const sameEscapes = new Set(["d", "D", "w", "W", "s", "S", "b", "B", "t", "n", "r", "f"]);
// JavaScript's syntax characters: an escaped one is literal in both dialects.
const syntaxChars = new Set([..."^$\\.*+?()[]{}|/"]);

/**
 * The JavaScript source (for the `u` flag) that means what PCRE makes of `pattern` on bytes, or
 * why there is none. Walks the pattern once, tracking character classes, to rewrite what the `u`
 * flag reads differently and refuse what cannot be said the same way in both dialects; the `u`
 * flag's own syntax errors catch the rest of PCRE's extensions.
 */
function translateRegex(pattern: string): Result<string> {
  let out = "";
  let inClass = false;
  const bad = (what: string): Result<string> => ({ ok: false, error: `regular expression "${pattern}": ${what}` });
  for (let i = 0; i < pattern.length; ) {
    const c = pattern[i] as string;
    const code = c.charCodeAt(0);
    if (code >= 0x80) {
      // nginx sees this character's UTF-8 bytes, each one a literal.
      const ch = String.fromCodePoint(pattern.codePointAt(i) as number);
      out += utf8Escapes(ch);
      i += ch.length;
      continue;
    }
    if (c === "\\") {
      const n = pattern[i + 1];
      if (n === undefined) return bad("ends with a backslash");
      if (n.charCodeAt(0) >= 0x80) {
        // PCRE: an escaped non-alphanumeric byte is that byte.
        const ch = String.fromCodePoint(pattern.codePointAt(i + 1) as number);
        out += utf8Escapes(ch);
        i += 1 + ch.length;
        continue;
      }
      if (n === "x") {
        const digits = pattern.slice(i + 2, i + 4);
        if (!hex.test(digits)) return bad("\\x must be followed by exactly two hex digits (\\x{...} is PCRE-only)");
        const byte = parseInt(digits, 16);
        out += byte >= 0x80 ? puaEscape(byte) : `\\x${digits}`;
        i += 4;
        continue;
      }
      if (n === "c") {
        const l = pattern[i + 2];
        if (l === undefined || !/[A-Za-z]/.test(l)) return bad("\\c must be followed by a letter");
        out += `\\c${l}`;
        i += 3;
        continue;
      }
      if (n === "0") {
        if (/[0-9]/.test(pattern[i + 2] ?? "")) return bad("octal escapes are not supported (write \\xHH)");
        out += "\\0";
        i += 2;
        continue;
      }
      if (/[1-9]/.test(n) || n === "k" || n === "g") {
        // An unset group's backreference matches the empty string in JavaScript and fails in PCRE.
        return bad("backreferences are not supported");
      }
      if (n === "u") return bad("\\u escapes are not supported by nginx's PCRE (write bytes as \\xHH)");
      if (n === "p" || n === "P") return bad("Unicode property escapes (\\p, \\P) are not supported: nginx matches bytes");
      if (n === "v") return bad("\\v is a vertical-space class in PCRE and one character in JavaScript; not supported");
      if (sameEscapes.has(n)) {
        out += `\\${n}`;
        i += 2;
        continue;
      }
      if (/[A-Za-z]/.test(n)) return bad(`"\\${n}" is no JavaScript escape: the pattern ${unsupported}`);
      // Escaped ASCII punctuation or space: a literal in PCRE; the `u` flag accepts only some
      // escaped punctuation, so write the others by code.
      out += syntaxChars.has(n) ? `\\${n}` : `\\x${n.charCodeAt(0).toString(16).padStart(2, "0")}`;
      i += 2;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      else if (c === "[") {
        if (/[:.=]/.test(pattern[i + 1] ?? "")) return bad(`POSIX classes like [[:alpha:]] are not supported (write [A-Za-z])`);
        out += "\\[";
        i += 1;
        continue;
      }
      out += c;
      i += 1;
      continue;
    }
    if (c === "[") {
      inClass = true;
      out += c;
      i += 1;
      if (pattern[i] === "^") {
        out += "^";
        i += 1;
      }
      if (pattern[i] === "]") return bad("a ']' first in a class is a literal in PCRE and closes an empty class in JavaScript (write \\])");
      continue;
    }
    out += c;
    i += 1;
  }
  return { ok: true, value: out };
}

function compileRegex(pattern: string, caseless: boolean): Result<RegExp> {
  const source = translateRegex(pattern);
  if (!source.ok) return source;
  try {
    return { ok: true, value: new RegExp(source.value, caseless ? "iu" : "u") };
  } catch (e) {
    const why = (e as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, "");
    return { ok: false, error: `regular expression "${pattern}" ${unsupported}: ${why}` };
  }
}

// ---------------------------------------------------------------------------------------------
// Request targets

export type NormalizedTarget =
  | {
      ok: true;
      /** decoded, normalized path used for matching ("binary" string: one char per byte, code 0-255) */
      path: string;
      /**
       * the path re-escaped for forwarding upstream, so the upstream sees exactly what was matched:
       * every byte but RFC 3986 unreserved characters, sub-delims except ";", ":", "@" and "/" as
       * %XX (uppercase). The proxy sends `forwardPath + (query ? "?" + query : "")`.
       */
      forwardPath: string;
      /** raw query string without "?", or "" */
      query: string;
    }
  | { ok: false; error: string }; // the caller answers 400 with this message

// forwardPath keeps RFC 3986 unreserved characters, sub-delims, ":", "@" and "/"; all else is %XX.
// ";" too: Java servlet containers cut `;params` out of each segment before resolving dot
// segments, so `/public/..;/admin` (matched here under /public/) would be served as /admin.
const forwardEscape: string[] = [];
for (let b = 0; b < 256; b++) {
  const c = String.fromCharCode(b);
  forwardEscape[b] = /[A-Za-z0-9\-._~!$&'()*+,=:@/]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
}

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const HASH = 0x23;
const QUESTION = 0x3f;
// The states of nginx's complex-URI parser.
const S = { Usual: 0, Slash: 1, Dot: 2, DotDot: 3, Quoted: 4, QuotedSecond: 5 } as const;
const isAlpha = (b: number) => (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const hexValue = (b: number) => (isDigit(b) ? b - 0x30 : (b | 0x20) >= 0x61 && (b | 0x20) <= 0x66 ? (b | 0x20) - 0x61 + 10 : -1);

const badTarget = (error: string): NormalizedTarget => ({ ok: false, error });
const notATarget = 'the request target must be a path starting with "/" or an absolute URL (http://host/path)';

/**
 * nginx's request-target handling (its request-line parser, host check and complex-URI parser,
 * with merge_slashes on). `target` is the request-target as received,
 * one char per byte. Origin-form and absolute-form (any scheme; the host is checked as nginx
 * checks it, then ignored) are accepted; anything else is an error. The path ends at the first
 * "?" (the query, up to a "#") or "#". %XX is decoded once; a decoded "/" or "." separates and
 * forms dot segments as a literal one does, a decoded "%", "#" or "?" is plain data. Slashes are
 * merged, "." and ".." resolved; ".." above the root, %00 and a bad % sequence are errors.
 * Backslash and ";" are ordinary bytes.
 *
 * One deliberate difference from nginx: a control character (0x01-0x1F, 0x7F) in the decoded path
 * is an error, where nginx matches it. PCRE's `$` matches before a final newline and JavaScript's
 * does not, so refusing them is simpler and safer (docs/authproxy.md#locations).
 */
export function normalizeRequestTarget(target: string): NormalizedTarget {
  const n = target.length;
  if (n === 0) return badTarget("the request target is empty");
  for (let i = 0; i < n; i++) {
    const b = target.charCodeAt(i);
    if (b > 0xff) return badTarget("the request target holds a character that is not a byte");
    if (b <= 0x20 || b === 0x7f) return badTarget("the request target holds a space or control character");
  }

  let start = 0;
  let emptyPath = false;
  if (target.charCodeAt(0) !== SLASH) {
    const absolute = absoluteForm(target);
    if (typeof absolute === "string") return badTarget(absolute);
    if (absolute.start === n) return finish("/", "");
    start = absolute.start;
    emptyPath = absolute.emptyPath;
  }

  // nginx's complex-URI parser, state for state.
  const out = new Uint8Array(n - start + 1);
  let u = 0;
  if (emptyPath) out[u++] = SLASH;
  let state: number = S.Usual;
  let quotedState: number = S.Usual;
  let decoded = 0;
  let pending = -1; // a decoded byte to run through quotedState before reading on
  let i = start;
  let queryAt = -1; // where the query starts, after its "?"
  let stopped = false; // at the query or the fragment
  // ".." just ended a segment: drop it and the segment before, or fail above the root.
  const up = (): boolean => {
    u -= 4;
    for (;;) {
      if (u < 0) return false;
      if (out[u] === SLASH) {
        u++;
        return true;
      }
      u--;
    }
  };
  const aboveRoot = 'the path climbs above the root ("..")';
  const badPercent = "invalid percent-encoding in the path (% must be followed by two hex digits)";

  while (!stopped) {
    let ch: number;
    if (pending >= 0) {
      ch = pending;
      pending = -1;
    } else if (i < n) {
      ch = target.charCodeAt(i++);
    } else {
      break;
    }
    if (state <= S.DotDot && (ch === QUESTION || ch === HASH)) {
      // The path ends here: "." and ".." before it count as segments.
      if (state === S.Dot) u--;
      else if (state === S.DotDot && !up()) return badTarget(aboveRoot);
      if (ch === QUESTION) queryAt = i;
      stopped = true;
      continue;
    }
    switch (state) {
      case S.Usual:
        if (ch === SLASH) state = S.Slash;
        if (ch === PERCENT) {
          quotedState = state;
          state = S.Quoted;
        } else {
          out[u++] = ch;
        }
        break;
      case S.Slash:
        if (ch === PERCENT) {
          quotedState = state;
          state = S.Quoted;
        } else if (ch === DOT) {
          state = S.Dot;
          out[u++] = ch;
        } else if (ch !== SLASH) {
          state = S.Usual;
          out[u++] = ch;
        } // else: merge_slashes
        break;
      case S.Dot:
        if (ch === PERCENT) {
          quotedState = state;
          state = S.Quoted;
        } else if (ch === SLASH) {
          // "/./": drop the dot, keep the slash
          state = S.Slash;
          u--;
        } else {
          state = ch === DOT ? S.DotDot : S.Usual;
          out[u++] = ch;
        }
        break;
      case S.DotDot:
        if (ch === PERCENT) {
          quotedState = state;
          state = S.Quoted;
        } else if (ch === SLASH) {
          if (!up()) return badTarget(aboveRoot);
          state = S.Slash;
        } else {
          state = S.Usual;
          out[u++] = ch;
        }
        break;
      case S.Quoted: {
        const v = hexValue(ch);
        if (v < 0) return badTarget(badPercent);
        decoded = v;
        state = S.QuotedSecond;
        break;
      }
      default: {
        const v = hexValue(ch);
        if (v < 0) return badTarget(badPercent);
        const b = (decoded << 4) + v;
        if (b === 0) return badTarget("NUL (%00) in the path");
        if (b === PERCENT || b === HASH || b === QUESTION) {
          // "%", "#" and "?" decode to data, never to a delimiter.
          state = S.Usual;
          out[u++] = b;
        } else {
          state = quotedState;
          pending = b;
        }
      }
    }
  }
  if (!stopped) {
    // The target ended inside the path.
    if (state === S.Quoted || state === S.QuotedSecond) return badTarget(badPercent);
    if (state === S.Dot) u--;
    else if (state === S.DotDot && !up()) return badTarget(aboveRoot);
  }

  let query = "";
  if (queryAt >= 0) {
    const hash = target.indexOf("#", queryAt);
    query = target.slice(queryAt, hash < 0 ? n : hash);
  }
  return finish(Buffer.from(out.buffer, out.byteOffset, u).toString("latin1"), query);
}

function finish(path: string, query: string): NormalizedTarget {
  let forwardPath = "";
  for (let i = 0; i < path.length; i++) {
    const b = path.charCodeAt(i);
    if (b < 0x20 || b === 0x7f) return badTarget("control character in the path (%01-%1F and %7F are refused)");
    forwardPath += forwardEscape[b];
  }
  return { ok: true, path, forwardPath, query };
}

/**
 * The absolute-form prefix as nginx's request-line parser reads it: scheme, "://", host (letters,
 * digits, "." and "-", or an IP literal in brackets), optional ":port". Answers where the path
 * starts (`emptyPath` when a "?" follows the authority directly; `start === length` when nothing
 * does: the path is "/"), or an error message.
 */
function absoluteForm(t: string): { start: number; emptyPath: boolean } | string {
  const n = t.length;
  const at = (i: number) => (i < n ? t.charCodeAt(i) : -1);
  let i = 0;
  if (!isAlpha(at(0))) return notATarget;
  while (i < n && (isAlpha(at(i)) || isDigit(at(i)) || at(i) === 0x2b || at(i) === 0x2d || at(i) === 0x2e)) i++;
  if (at(i) !== 0x3a || at(i + 1) !== SLASH || at(i + 2) !== SLASH) return notATarget;
  i += 3;
  const hostStart = i;
  if (at(i) === 0x5b) {
    i++;
    while (i < n && /[0-9A-Za-z:\-._~!$&'()*+,;=]/.test(t[i] as string)) i++;
    if (at(i) !== 0x5d) return "invalid IP literal in the request target's host";
    i++;
  } else {
    while (i < n && (isAlpha(at(i)) || isDigit(at(i)) || at(i) === 0x2e || at(i) === 0x2d)) i++;
  }
  const hostEnd = i;
  if (at(i) === 0x3a) {
    i++;
    while (isDigit(at(i))) i++;
  }
  const next = at(i);
  if (next !== -1 && next !== SLASH && next !== 0x3f) return "invalid authority in the request target (host[:port] then / or ?)";
  if (!validHost(t.slice(hostStart, hostEnd))) return "invalid host in the request target";
  return { start: i, emptyPath: next === 0x3f };
}

/** nginx's host check on what its request line allows: no "..", one trailing "." dropped, not empty. */
function validHost(host: string): boolean {
  if (host.includes("..")) return false;
  let len = host.length;
  // The port is not part of `host` here; a literal's length ends at "]".
  if (host.startsWith("[")) len = host.indexOf("]") + 1;
  if (host.charCodeAt(len - 1) === 0x2e) len--;
  return len > 0;
}

// ---------------------------------------------------------------------------------------------
// The table

interface Prefix {
  bytes: string;
  index: number;
  /** `^~`: when this is the longest prefix, regexes are not tried. */
  noregex: boolean;
}

const toBytes = (s: string) => Buffer.from(s, "utf8").toString("latin1");

/**
 * The locations of one config, in config order. match() answers the index of the location nginx
 * would choose for a normalized path, or undefined when none does (the caller then applies its
 * implicit final "/").
 *
 * Duplicates (the same prefix twice, plain or `^~`; the same exact path twice) are an nginx config
 * error, refused by the config loader; here the first of them wins. `= /x` with `/x` is no
 * duplicate: the exact one takes "/x", the prefix one the rest.
 *
 * Throws when a location is not what parseLocationMatch accepts.
 */
export class LocationTable {
  readonly #exact = new Map<string, number>();
  /** Longest first; equal lengths keep config order, so the first duplicate wins. */
  readonly #prefixes: Prefix[] = [];
  readonly #regexes: { re: RegExp; index: number }[] = [];

  constructor(locations: readonly LocationMatch[]) {
    locations.forEach((l, index) => {
      if (l.modifier === "~" || l.modifier === "~*") {
        const re = compileRegex(l.pattern, l.modifier === "~*");
        if (!re.ok) throw new Error(`location "${l.text}": ${re.error}`);
        this.#regexes.push({ re: re.value, index });
        return;
      }
      if (!l.pattern.startsWith("/")) throw new Error(`location "${l.text}": the pattern must start with "/"`);
      const bytes = toBytes(l.pattern);
      if (l.modifier === "=") {
        if (!this.#exact.has(bytes)) this.#exact.set(bytes, index);
      } else {
        this.#prefixes.push({ bytes, index, noregex: l.modifier === "^~" });
      }
    });
    this.#prefixes.sort((a, b) => b.bytes.length - a.bytes.length || a.index - b.index);
  }

  /** `path`: a normalized path from normalizeRequestTarget (one char per byte). */
  match(path: string): number | undefined {
    const exact = this.#exact.get(path);
    if (exact !== undefined) return exact;
    let prefix: Prefix | undefined;
    for (const p of this.#prefixes) {
      if (path.startsWith(p.bytes)) {
        prefix = p;
        break;
      }
    }
    if (prefix?.noregex) return prefix.index;
    if (this.#regexes.length > 0) {
      const subject = regexSubject(path);
      for (const r of this.#regexes) if (r.re.test(subject)) return r.index;
    }
    return prefix?.index;
  }
}
