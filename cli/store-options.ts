// Reaching an etcd store securely (the server commands that take -store): the TLS material of an
// etcds:// store (the CA that signed etcd's server certificate, a client certificate and key for
// etcd's --client-cert-auth) and an etcd user with its password (etcd `auth enable`, etcd:// or
// etcds://). The files are read here, so that an error names the option and the path; the store
// gets their contents (StoreConnection, adapters/store/open.ts).
//
// The password never comes from the command line (it would show in `ps` and in shell history):
// -store-password-file names a file holding it, or CAPSTAN_STORE_PASSWORD holds it. It is never
// logged or printed, and is kept out of the returned object's enumerable properties, so that
// logging that object shows no password either.
import { X509Certificate } from "node:crypto";
import { createSecureContext } from "node:tls";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { openStore, StoreUrlError, type StoreConnection } from "../adapters/store/open.ts";
import type { Store } from "../adapters/store/store.ts";
import { readOptionFile, readPemOption } from "./option-files.ts";
import { envName, UsageError, type OptionDef, type OptionValues } from "./options.ts";

/** The environment variable that may hold the password of -store-user. */
export const storePasswordEnv = "CAPSTAN_STORE_PASSWORD";

export const storeCaOption: OptionDef = {
  name: "store-ca",
  type: "string",
  help: "etcds:// store: CA certificate that signed etcd's server certificate (PEM file; default: Node's built-in roots)",
};
export const storeCertOption: OptionDef = {
  name: "store-cert",
  type: "string",
  help: "etcds:// store: client certificate for etcd's --client-cert-auth (PEM file; with -store-key)",
};
export const storeKeyOption: OptionDef = { name: "store-key", type: "string", help: "etcds:// store: private key of -store-cert (PEM file)" };
export const storeUserOption: OptionDef = {
  name: "store-user",
  type: "string",
  help: `etcd user (etcd auth enable); its password comes from -store-password-file or ${storePasswordEnv}`,
};
export const storePasswordFileOption: OptionDef = {
  name: "store-password-file",
  type: "string",
  help: "file holding the password of -store-user (trailing newline ignored)",
};

/** The options of this file, to list next to -store. */
export const storeConnectionOptionDefs: OptionDef[] = [
  storeCaOption,
  storeCertOption,
  storeKeyOption,
  storeUserOption,
  storePasswordFileOption,
];

/**
 * The StoreConnection the -store-* options describe (empty when none is given). Reads the files;
 * a missing, unreadable or unusable file, a certificate without its key (or the reverse), a user
 * without a password (or the reverse), or TLS material for a store URL that is not etcds:// is a
 * UsageError naming the option (and the path). `options.store`, when given, is the store URL.
 */
export function storeConnectionFromOptions(
  options: OptionValues,
  env: Record<string, string | undefined> = process.env,
): StoreConnection {
  const given = (name: string) => {
    const value = options[name];
    return typeof value === "string" && value !== "" ? value : undefined;
  };
  const scheme = typeof options.store === "string" ? /^([a-z0-9]+):\/\//i.exec(options.store.trim())?.[1]?.toLowerCase() : undefined;
  const connection: StoreConnection = {};

  const caPath = given("store-ca");
  const certPath = given("store-cert");
  const keyPath = given("store-key");
  if ((certPath === undefined) !== (keyPath === undefined)) {
    const [has, lacks] = certPath !== undefined ? ["store-cert", "store-key"] : ["store-key", "store-cert"];
    throw new UsageError(
      `-${has} is given without -${lacks}: a client certificate needs its private key and the key its certificate ` +
        `(give both, or set ${envName(lacks)})`,
    );
  }
  if (caPath !== undefined || certPath !== undefined) {
    const tlsOptions = [caPath !== undefined ? "-store-ca" : "", certPath !== undefined ? "-store-cert, -store-key" : ""].filter(Boolean).join(", ");
    if (scheme !== undefined && scheme !== "etcds") {
      throw new UsageError(`${tlsOptions}: TLS to the store needs an etcds:// store URL, not ${scheme}:// (-store ${String(options.store)})`);
    }
    const ca = caPath === undefined ? undefined : readPemOption("store-ca", caPath);
    if (ca !== undefined) {
      // Node's TLS context skips a CA it cannot parse, without a word: parse it here.
      try {
        new X509Certificate(ca);
      } catch (e) {
        throw new UsageError(`-store-ca ${caPath}: not a usable CA certificate (${(e as Error).message})`);
      }
    }
    let cert: string | undefined;
    let key: string | undefined;
    if (certPath !== undefined && keyPath !== undefined) {
      cert = readPemOption("store-cert", certPath);
      key = readPemOption("store-key", keyPath);
      try {
        createSecureContext({ cert, key });
      } catch (e) {
        throw new UsageError(
          `-store-cert ${certPath}, -store-key ${keyPath}: not a usable certificate and private key pair (${(e as Error).message})`,
        );
      }
    }
    connection.tls = { ...(ca !== undefined ? { ca } : {}), ...(cert !== undefined && key !== undefined ? { cert, key } : {}) };
  }

  const user = given("store-user");
  const passwordPath = given("store-password-file");
  const passwordEnv = env[storePasswordEnv];
  const passwordFromEnv = passwordEnv !== undefined && passwordEnv !== "" ? passwordEnv : undefined;
  if (user === undefined) {
    if (passwordPath !== undefined) throw new UsageError("-store-password-file is given without -store-user: whose password is it?");
    if (passwordFromEnv !== undefined) throw new UsageError(`${storePasswordEnv} is set but -store-user is not: give the etcd user too`);
    return connection;
  }
  if (scheme !== undefined && scheme !== "etcd" && scheme !== "etcds") {
    throw new UsageError(`-store-user: an etcd user applies only to an etcd:// or etcds:// store, not ${scheme}:// (-store ${String(options.store)})`);
  }
  if (passwordPath !== undefined && passwordFromEnv !== undefined) {
    throw new UsageError(`-store-password-file and ${storePasswordEnv} are both given: give the password of -store-user once`);
  }
  let password: string;
  if (passwordPath !== undefined) {
    password = readOptionFile("store-password-file", passwordPath).replace(/\r?\n$/, "");
    if (password === "") throw new UsageError(`-store-password-file ${passwordPath}: the file is empty`);
  } else if (passwordFromEnv !== undefined) {
    password = passwordFromEnv;
  } else {
    throw new UsageError(`-store-user ${user} needs a password: give -store-password-file FILE or set ${storePasswordEnv}`);
  }
  const auth = { username: user } as { username: string; password: string };
  // Readable by the store, invisible to JSON.stringify, util.inspect, spreading and loggers.
  Object.defineProperty(auth, "password", { value: password, enumerable: false });
  connection.auth = auth;
  return connection;
}

/**
 * The store of a one-shot command (`backup`, `restore`): -store with the -store-* options. A
 * SQLite path with no database is a UsageError (ending with `createHint`) unless `create` is true:
 * a mistyped path would otherwise make a new, empty store (and its directory).
 */
export function openCommandStore(options: OptionValues, opts: { create?: boolean; createHint?: string } = {}): Store {
  const url = options.store as string;
  const sqlitePath = /^sqlite:\/\/(.+)$/i.exec(url.trim())?.[1];
  if (sqlitePath !== undefined && sqlitePath !== ":memory:" && opts.create !== true && !existsSync(resolve(sqlitePath))) {
    throw new UsageError(`-store ${url}: there is no database at ${resolve(sqlitePath)}${opts.createHint ?? ""}`);
  }
  try {
    return openStore(url, storeConnectionFromOptions(options));
  } catch (e) {
    if (e instanceof StoreUrlError) throw new UsageError(e.message);
    throw e;
  }
}
