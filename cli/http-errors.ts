// How a client command's request can fail, apart from the client that makes it (http-client.ts), so
// that a command's failure report (failure.ts) does not load the HTTP stack: ApiError is an answer
// of the server, ServerUnreachableError no answer at all, ServerCertificateError an HTTPS server
// whose certificate does not verify.

/** The server answered with an error status. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    /** "BadRequest", "NotFound", "NotAllowed", ... (or "HTTP <status>" for a body without one). */
    readonly code: string,
    message: string,
    /** NotAllowed's reason: "AlreadyExists", "InsufficientResources", "InUse". */
    readonly reason?: string,
    /** BadRequest's details: which field or parameter, and what is wrong with it. */
    readonly details?: { path: string; message: string }[],
  ) {
    super(message);
  }

  /** "NotAllowed (AlreadyExists): podgroup hello exists; use PATCH", plus BadRequest details. */
  describe(): string {
    const head = `${this.code}${this.reason ? ` (${this.reason})` : ""}: ${this.message}`;
    const details = (this.details ?? []).map((d) => `  ${d.path ? `${d.path}: ` : ""}${d.message}`);
    return [head, ...details].join("\n");
  }
}

/** Which service a client talks to; named in messages. */
export type Component = "orchestrator" | "console" | "secrets service";

/** A CA to verify HTTPS servers with, instead of the system roots. */
export interface CaBundle {
  /** PEM contents (one or more certificates). */
  pem: string;
  /** Where it came from, for messages: "/home/a/ca.pem (-ca)". */
  source: string;
}

/** An HTTPS server whose certificate does not verify (unknown CA, expired, wrong name). */
export class ServerCertificateError extends Error {
  override readonly name = "ServerCertificateError";
  constructor(
    readonly server: string,
    /** Node's code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "CERT_HAS_EXPIRED", "ERR_TLS_CERT_ALTNAME_INVALID", ... */
    readonly code: string,
    detail: string,
    readonly component: Component = "orchestrator",
    readonly ca?: string,
  ) {
    super(`cannot verify the ${component} at ${server}: ${detail}`);
  }
}

/** No answer from the server: connection refused, DNS failure, timeout. */
export class ServerUnreachableError extends Error {
  override readonly name = "ServerUnreachableError";
  constructor(
    readonly server: string,
    reason: string,
    readonly component: Component = "orchestrator",
  ) {
    super(`cannot reach the ${component} at ${server}: ${reason}`);
  }
}

/** What a certificate verification failure means, by Node's (OpenSSL's) code. */
const unknownAuthority = new Set([
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_UNTRUSTED",
]);
const otherCertificateCodes = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_SIGNATURE_FAILURE",
  "CERT_REVOKED",
  "CERT_REJECTED",
  "INVALID_CA",
  "INVALID_PURPOSE",
  "PATH_LENGTH_EXCEEDED",
  "HOSTNAME_MISMATCH",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "ERROR_IN_CERT_NOT_BEFORE_FIELD",
  "ERROR_IN_CERT_NOT_AFTER_FIELD",
]);

/** A ServerCertificateError when `e` is a certificate verification failure, else undefined. */
export function certificateError(e: unknown, server: string, component: Component, ca?: CaBundle): ServerCertificateError | undefined {
  const cause = (e as { cause?: { code?: unknown; message?: unknown; reason?: unknown } } | undefined)?.cause;
  const code = typeof cause?.code === "string" ? cause.code : "";
  if (!unknownAuthority.has(code) && !otherCertificateCodes.has(code)) return undefined;
  const said = typeof cause?.reason === "string" ? cause.reason : typeof cause?.message === "string" ? cause.message : code;
  const giveCa = "give the CA that signed it with -ca FILE, CAPSTAN_CA, or capstan login CLUSTER -ca FILE";
  let detail: string;
  if (unknownAuthority.has(code)) {
    detail = ca
      ? `certificate signed by unknown authority (${code}: ${said}): it is not signed by the CA in ${ca.source}; ${giveCa}`
      : `certificate signed by unknown authority (${code}: ${said}): it is not signed by a CA of the system roots; ${giveCa}`;
  } else if (code === "CERT_HAS_EXPIRED") detail = `the server's certificate has expired (${code})`;
  else if (code === "CERT_NOT_YET_VALID") detail = `the server's certificate is not valid yet (${code}; check the clocks)`;
  else if (code === "ERR_TLS_CERT_ALTNAME_INVALID" || code === "HOSTNAME_MISMATCH") {
    detail = `the server's certificate is not valid for ${new URL(server).hostname} (${code}: ${said}); use a URL with a name the certificate lists`;
  } else detail = `the server's certificate was rejected (${code}: ${said})`;
  return new ServerCertificateError(server, code, detail, component, ca?.source);
}
