// Files named by options (certificates, keys, password files): read once at start, every failure a
// usage error naming the option and the path, so a typo in a deployment says exactly what to fix.
import { readFileSync } from "node:fs";
import { UsageError } from "./options.ts";

/** The file's text; UsageError "-OPTION PATH: cannot read the file (ENOENT)". */
export function readOptionFile(option: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new UsageError(`-${option} ${path}: cannot read the file (${err.code ?? err.message})`);
  }
}

/** A PEM file's text; with `kind` ("CERTIFICATE", "PRIVATE KEY") it must hold a block of that kind. */
export function readPemOption(option: string, path: string, kind?: string): string {
  const text = readOptionFile(option, path);
  if (kind === undefined) {
    if (!text.includes("-----BEGIN ")) throw new UsageError(`-${option} ${path}: not a PEM file (no "-----BEGIN" line)`);
  } else if (!new RegExp(`-----BEGIN [A-Z ]*${kind}-----`).test(text)) {
    throw new UsageError(`-${option} ${path}: not a PEM file with a ${kind} (no "-----BEGIN ...${kind}-----" line)`);
  }
  return text;
}
