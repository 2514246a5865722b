// Where the browser goes after a login: the state's second part, but only ever a path on this
// same origin (docs/authproxy.md#after-login). Anything else lands on "/": an absolute URL, a
// scheme ("javascript:", "http:evil"), a network-path reference ("//evil", "/\evil" that browsers
// read as "//evil"), whitespace or dot segments between leading slashes, control characters
// (browsers drop tabs and newlines, turning "/\t/evil" into "//evil"; CR LF would split headers).

/** Longest return path kept; a longer one lands on "/" (the state travels in a URL and a cookie-less hop). */
export const maxReturnPathLength = 4096;

// Two slashes (either kind) at the start, possibly with whitespace or one or two dots between them.
const networkPath = /^[/\\](?:[\s\v]*|\.{1,2})[/\\]/;
// eslint-disable-next-line no-control-regex
const controlChars = /[\x00-\x1f\x7f]/;

/** The state's second part (still quoted, as in the state) as a safe same-origin path, or "/". */
export function safeReturnPath(quoted: string): string {
  let path: string;
  try {
    path = decodeURIComponent(quoted);
  } catch {
    return "/";
  }
  if (path.length === 0 || path.length > maxReturnPathLength) return "/";
  if (path[0] !== "/" || networkPath.test(path) || controlChars.test(path) || path.includes("\\")) return "/";
  // Non-ASCII came from a percent-encoded original; encode it again so the Location header is
  // plain ASCII (Node refuses characters above U+00FF in headers).
  return path.replace(/[^\x20-\x7e]+/g, (s) => encodeURIComponent(s)).replace(/ /g, "%20");
}

/** The state's second part for a request path (path and query as the client will see it again). */
export function quoteReturnPath(pathAndQuery: string): string {
  return encodeURIComponent(pathAndQuery);
}
