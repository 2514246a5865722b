// Mutual TLS to remote Docker engines (the server commands that take -cluster): the CA that signed
// the engines' certificates and our client certificate and key, as PEM files. Given, they apply to
// every tcp:// endpoint of -cluster (default port 2376); without them plain tcp:// is accepted only
// on a loopback address (adapters/cluster/spec.ts). The files are read here, so that an error names
// the option and the path; the cluster adapter gets their contents.
import type { DockerClusterOptions } from "../adapters/cluster/index.ts";
import { readPemOption } from "./option-files.ts";
import { envName, UsageError, type OptionDef, type OptionValues } from "./options.ts";

export type DockerTls = NonNullable<DockerClusterOptions["tls"]>;

const parts = [
  { option: "docker-tls-ca", what: "CA certificate that signed the engines' server certificates (PEM file)" },
  { option: "docker-tls-cert", what: "client certificate presented to the engines (PEM file)" },
  { option: "docker-tls-key", what: "private key of -docker-tls-cert (PEM file)" },
] as const;

export const dockerTlsOptionDefs: OptionDef[] = parts.map((p) => ({
  name: p.option,
  type: "string",
  help: `${p.what}; with all three -docker-tls-* options, tcp:// engines are reached over mutual TLS`,
}));

/**
 * The TLS material of -docker-tls-ca, -docker-tls-cert and -docker-tls-key: all three or none
 * (undefined). Reads the files; a missing option or an unreadable or non-PEM file is a UsageError
 * that names the option and the path.
 */
export function dockerTlsFromOptions(options: OptionValues): DockerTls | undefined {
  const given = parts.filter((p) => typeof options[p.option] === "string" && options[p.option] !== "");
  if (given.length === 0) return undefined;
  const missing = parts.filter((p) => !given.includes(p));
  if (missing.length > 0) {
    const names = (list: readonly (typeof parts)[number][]) => list.map((p) => `-${p.option}`).join(", ");
    throw new UsageError(
      `${names(missing)} ${missing.length > 1 ? "are" : "is"} missing: TLS to the Docker engines needs all of -docker-tls-ca, -docker-tls-cert and -docker-tls-key ` +
        `(given: ${names(given)}; or set ${missing.map((p) => envName(p.option)).join(", ")})`,
    );
  }
  const [ca, cert, key] = parts.map((p) => readPemOption(p.option, options[p.option] as string));
  return { ca: ca!, cert: cert!, key: key! };
}
