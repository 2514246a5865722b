// HTTPS on the server commands (`capstan up`, `orchestrator`, `secrets`, `console`): -tls-cert and
// -tls-key, PEM files, both or neither. Given, the manager serves every API, /healthz, /readyz and
// /metrics over HTTPS only (runtime/manager.ts). The files are read and checked here (a key that
// does not match the certificate included), so that an error names the option and the path before
// anything starts; the manager gets their contents.
import { createSecureContext } from "node:tls";
import { readPemOption } from "./option-files.ts";
import { envName, UsageError, type OptionDef, type OptionValues } from "./options.ts";

/** PEM contents: the certificate (its chain may follow) and its private key. */
export interface ServerTls {
  cert: string;
  key: string;
}

const parts = [
  { option: "tls-cert", what: "serve HTTPS with this certificate (PEM file; intermediates may follow it); needs -tls-key" },
  { option: "tls-key", what: "private key of -tls-cert (PEM file); needs -tls-cert" },
] as const;

export const tlsOptionDefs: OptionDef[] = parts.map((p) => ({ name: p.option, type: "string", help: p.what }));

/**
 * The certificate and key of -tls-cert and -tls-key: both or none (undefined). Reads the files; a
 * missing option, an unreadable or non-PEM file, or a key that does not match the certificate is a
 * UsageError that names the options and the paths.
 */
export function tlsFromOptions(options: OptionValues): ServerTls | undefined {
  const given = parts.filter((p) => typeof options[p.option] === "string" && options[p.option] !== "");
  if (given.length === 0) return undefined;
  const missing = parts.find((p) => !given.includes(p));
  if (missing !== undefined) {
    const other = given[0]!;
    throw new UsageError(`-${missing.option} is missing: HTTPS needs both -tls-cert and -tls-key (given: -${other.option}; or set ${envName(missing.option)})`);
  }
  const certPath = options["tls-cert"] as string;
  const keyPath = options["tls-key"] as string;
  const cert = readPemOption("tls-cert", certPath, "CERTIFICATE");
  const key = readPemOption("tls-key", keyPath, "PRIVATE KEY");
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new UsageError(`-tls-cert ${certPath} and -tls-key ${keyPath}: not a usable certificate and key (${(e as Error).message})`);
  }
  return { cert, key };
}
