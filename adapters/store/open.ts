// The -store flag: one URL names the store and how to reach it.
//   etcd://127.0.0.1:2379[,host:port...]   EtcdStore on those cluster members
//   etcds://etcd-1.example:2379[,...]      the same over TLS; StoreConnection.tls gives the CA
//                                          (default: Node's built-in roots) and a client
//                                          certificate for etcd's --client-cert-auth
//   sqlite://path/state.db                 SqliteStore; the path is relative to the working
//   sqlite:///abs/path/state.db            directory unless it starts with "/" (three slashes);
//   sqlite://:memory:                      its directory is created. ":memory:" is a private,
//                                          non-durable store (tests, demos).
// An etcd user and password (StoreConnection.auth, etcd `auth enable`) work with both etcd schemes.
// Secrets never travel in the URL: they come in the StoreConnection (the CLI reads them from files
// or the environment, cli/store-options.ts).
import { resolve } from "node:path";
import { EtcdStore, type EtcdAuth, type EtcdTls } from "./etcd.ts";
import { SqliteStore } from "./sqlite.ts";
import type { Store } from "./store.ts";

export class StoreUrlError extends Error {
  override readonly name = "StoreUrlError";
  constructor(
    readonly url: string,
    reason: string,
  ) {
    super(
      `invalid store URL ${JSON.stringify(url)}: ${reason} ` +
        "(expected etcd://host:port[,host:port...], etcds://host:port[,host:port...] or sqlite://path/state.db)",
    );
  }
}

/** How to reach an etcd store beyond its URL. */
export interface StoreConnection {
  /** TLS material (PEM contents) for an etcds:// store: ca (default: Node's built-in roots), cert and key (both or neither). */
  tls?: EtcdTls;
  /** etcd user and password (etcd `auth enable`), for etcd:// and etcds://. */
  auth?: EtcdAuth;
}

export function openStore(url: string, connection: StoreConnection = {}): Store {
  if (typeof url !== "string") throw new StoreUrlError(String(url), "not a string");
  const scheme = /^([a-z0-9]+):\/\/(.*)$/i.exec(url.trim());
  if (!scheme) throw new StoreUrlError(url, "no scheme");
  const [, name, rest] = scheme as unknown as [string, string, string];
  switch (name.toLowerCase()) {
    case "etcd":
    case "etcds": {
      const secure = name.toLowerCase() === "etcds";
      if (!secure && connection.tls) {
        throw new StoreUrlError(url, "TLS settings (a CA or a client certificate) need an etcds:// URL");
      }
      return new EtcdStore({
        endpoints: parseEndpoints(url, rest),
        // Processes never read WatchEvent.prevKv (EtcdStoreOptions.watchPrevKv says why it is off).
        watchPrevKv: false,
        ...(secure ? { tls: connection.tls ?? {} } : {}),
        ...(connection.auth ? { auth: connection.auth } : {}),
      });
    }
    case "sqlite":
      if (connection.tls || connection.auth) {
        throw new StoreUrlError(url, "TLS and user settings apply only to etcd:// and etcds:// stores");
      }
      return new SqliteStore({ path: parsePath(url, rest) });
    default:
      throw new StoreUrlError(url, `unknown scheme "${name}"`);
  }
}

function parseEndpoints(url: string, rest: string): string[] {
  const list = rest.replace(/\/$/, "");
  if (list === "") throw new StoreUrlError(url, "no etcd endpoint");
  return list.split(",").map((endpoint) => {
    const match = /^([^\s/:,@?#]+):(\d{1,5})$/.exec(endpoint.trim());
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      throw new StoreUrlError(url, `endpoint ${JSON.stringify(endpoint)} is not host:port`);
    }
    return `${match[1]}:${port}`;
  });
}

function parsePath(url: string, rest: string): string {
  if (rest === ":memory:") return rest;
  if (rest === "" || rest.endsWith("/")) throw new StoreUrlError(url, "no database file name");
  if (/[?#]/.test(rest)) throw new StoreUrlError(url, "query strings and fragments are not supported");
  return resolve(rest);
}
