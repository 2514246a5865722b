// EtcdStore against a real etcd speaking TLS (etcds://): with --client-cert-auth, only a client
// certificate signed by etcd's trusted CA gets in, and the client only trusts a server certificate
// its CA signed. Then etcd's users (`auth enable`): a right password works, a wrong one fails, over
// TLS and over plain etcd://. Every failure must come quickly and say what is wrong: the store
// never hangs on a refused handshake. Each etcd here is private (test/helpers/etcd-process.ts) and
// listens on 127.0.0.1 only; certificates are made for this run (test/helpers/certs.ts).
import { readFileSync } from "node:fs";
import { Etcd3, Range } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdAccessError, EtcdStore, type EtcdTls } from "../../../adapters/store/etcd.ts";
import { StoreUnavailableError, WatchBrokenError } from "../../../adapters/store/errors.ts";
import { openStore, type StoreConnection } from "../../../adapters/store/open.ts";
import type { Store } from "../../../adapters/store/store.ts";
import { makePki, type IssuedCert, type Pki } from "../../helpers/certs.ts";
import { startEtcd, type EtcdProcess } from "../../helpers/etcd-process.ts";
import { loadServices, uniqueName } from "../../helpers/services.ts";
import { describeStoreContract, record, waitFor } from "./contract.ts";

const read = (path: string) => readFileSync(path, "utf8");
const prefix = `/capstan-test/${uniqueName("etcd-tls")}/`;

let pki: Pki;
let other: Pki;
let server: IssuedCert;
let client: IssuedCert;
let rootClient: IssuedCert;
let otherClient: IssuedCert;

beforeAll(async () => {
  pki = await makePki("capstan-etcd-ca");
  other = await makePki("unrelated-ca");
  server = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
  client = await pki.issue("client", { client: true });
  // etcd takes the user from a client certificate's CN when auth is on and no token is sent.
  rootClient = await pki.issue("root", { client: true });
  otherClient = await other.issue("client", { client: true });
});
afterAll(async () => {
  await Promise.all([pki?.remove(), other?.remove()]);
});

/** The TLS settings of a client holding `cert` (default: the right client) and trusting `ca`. */
function tlsOf(ca: string | undefined, cert: IssuedCert | null = client): EtcdTls {
  return { ...(ca ? { ca: read(ca) } : {}), ...(cert ? { cert: read(cert.cert), key: read(cert.key) } : {}) };
}

/** The error of `call` and how long it took; fails the test if the call succeeds. */
async function failure(call: () => Promise<unknown>): Promise<{ error: Error; ms: number }> {
  const started = Date.now();
  try {
    await call();
  } catch (error) {
    return { error: error as Error, ms: Date.now() - started };
  }
  throw new Error("expected the call to fail");
}

/** An etcd3 admin client (for setting up users; the store under test never uses one). */
function adminClient(etcd: EtcdProcess, tls?: EtcdTls, auth?: { username: string; password: string }): Etcd3 {
  const pem = (v: string | Buffer | undefined) => (v === undefined ? undefined : Buffer.from(v));
  return new Etcd3({
    hosts: [etcd.clientUrl],
    ...(tls ? { credentials: { rootCertificate: pem(tls.ca)!, privateKey: pem(tls.key), certChain: pem(tls.cert) } } : {}),
    ...(auth ? { auth } : {}),
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 5_000 }),
  });
}

/**
 * `etcdctl role add root; user add root; user grant-role root root; role add capstan; user add
 * capstan; user grant-role capstan capstan; auth enable` through etcd3's auth API (etcdctl is not
 * installed everywhere), with read-write on every key for the capstan role: the range [\0, \0),
 * which etcdctl cannot type (docs/store.md). An empty start key (`--from-key ''`) grants nothing
 * in etcd 3.4, and a "/" prefix is not enough: the store reads its revision through the key \0.
 */
async function enableAuth(admin: Etcd3, passwords: { root: string; capstan: string }): Promise<void> {
  await admin.role("root").create();
  await (await admin.user("root").create(passwords.root)).addRole("root");
  const role = await admin.role("capstan").create();
  await role.grant({ permission: "Readwrite", range: new Range(Buffer.from([0]), Buffer.from([0])) });
  await (await admin.user("capstan").create(passwords.capstan)).addRole("capstan");
  await admin.auth.authEnable();
}

/** put/get/list/txn/watch/lease on one store: the basics every Capstan process uses. */
async function exerciseStore(store: Store, p: string): Promise<void> {
  const from = (await store.revision()) + 1;
  const r = record(store, p, from);
  const put = await store.put(`${p}a`, "1");
  expect(await store.get(`${p}a`)).toMatchObject({ value: "1", modRevision: put.revision });
  const swapped = await store.txn([{ key: `${p}a`, target: "modRevision", equals: put.revision }], [{ type: "put", key: `${p}b`, value: "2" }]);
  expect(swapped.succeeded).toBe(true);
  const lost = await store.put(`${p}a`, "x", { expect: [{ key: `${p}a`, target: "modRevision", equals: put.revision - 1 }] });
  expect(lost.succeeded).toBe(false);
  const lease = await store.grantLease(5);
  await store.put(`${p}c`, "3", { lease: lease.id });
  const listed = await store.list(p);
  expect(listed.items.map((kv) => [kv.key, kv.value])).toEqual([
    [`${p}a`, "1"],
    [`${p}b`, "2"],
    [`${p}c`, "3"],
  ]);
  await waitFor("three watch events", () => r.events.length >= 3, 10_000);
  expect(r.events.map((e) => [e.type, e.kv.key])).toEqual([
    ["put", `${p}a`],
    ["put", `${p}b`],
    ["put", `${p}c`],
  ]);
  expect(r.errors).toEqual([]);
  await r.watch.close();
  await lease.revoke();
  await store.deletePrefix(p);
}

describe("etcds:// to an etcd with --client-cert-auth", () => {
  let etcd: EtcdProcess;
  beforeAll(async () => {
    etcd = await startEtcd({ tls: { ...server, clientCa: pki.ca } });
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it("works with the right CA and client certificate: put, get, list, txn, watch, lease", async () => {
    const store = openStore(`etcds://${etcd.endpoint}`, { tls: tlsOf(pki.ca) });
    expect(store.description).toBe(`etcds://${etcd.endpoint}`);
    try {
      await exerciseStore(store, `${prefix}basics/`);
    } finally {
      await store.close();
    }
  });

  it.each([
    ["no client certificate", () => tlsOf(pki.ca, null), /etcd requires a TLS client certificate \(--client-cert-auth\) and none was given/],
    ["a client certificate of another CA", () => tlsOf(pki.ca, otherClient), /etcd refused our TLS client certificate: it must be signed by a CA in etcd's --trusted-ca-file/],
    ["a wrong server CA", () => tlsOf(other.ca), /etcd's server certificate is not trusted: it must be signed by the CA given with -store-ca/],
    ["no CA (Node's built-in roots do not know ours)", () => tlsOf(undefined), /etcd's server certificate is not trusted/],
  ])("fails quickly with a clear StoreUnavailableError given %s", async (_, tls, message) => {
    const store = new EtcdStore({ endpoints: [etcd.endpoint], tls: tls(), callTimeoutMs: 3_000 });
    try {
      const { error, ms } = await failure(() => store.get(`${prefix}x`));
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error.message).toContain(`etcd get at etcds://${etcd.endpoint} failed: `);
      expect(error.message).toMatch(message);
      // A refused handshake fails the call at once, well before the 3 s deadline.
      expect(ms).toBeLessThan(2_500);
      // So does every further call (no hang, no retry loop), and a write.
      const again = await failure(() => store.put(`${prefix}x`, "1"));
      expect(again.error).toBeInstanceOf(StoreUnavailableError);
      expect(again.error.message).toMatch(message);
      expect(again.ms).toBeLessThan(3_500);
    } finally {
      await store.close();
    }
  });

  it("fails a watch instead of hanging when the handshake is refused", async () => {
    const store = new EtcdStore({ endpoints: [etcd.endpoint], tls: tlsOf(pki.ca, otherClient), callTimeoutMs: 2_000 });
    try {
      const r = record(store, prefix, 1);
      await waitFor("the watch to fail", () => r.errors.length > 0, 5_000);
      expect(r.errors[0]).toBeInstanceOf(WatchBrokenError);
    } finally {
      await store.close();
    }
  });

  it("says so when a plain etcd:// client dials the TLS port", async () => {
    const store = openStore(`etcd://${etcd.endpoint}`);
    try {
      const { error, ms } = await failure(() => store.get(`${prefix}x`));
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error.message).toMatch(/if this etcd serves TLS, use etcds:\/\//);
      expect(ms).toBeLessThan(2_500);
    } finally {
      await store.close();
    }
  });

  // The whole Store contract, over TLS with a client certificate (EtcdStore's defaults otherwise).
  describeStoreContract("EtcdStore over etcds:// with a client certificate", {
    open: async () => new EtcdStore({ endpoints: [etcd.endpoint], tls: tlsOf(pki.ca) }),
  });

  describe("with etcd auth enabled", () => {
    beforeAll(async () => {
      const admin = adminClient(etcd, tlsOf(pki.ca));
      try {
        await enableAuth(admin, { root: "root-pw", capstan: "capstan-pw" });
      } finally {
        admin.close();
      }
    });

    it("takes the user from the client certificate's CN when no password is given", async () => {
      const asRoot = openStore(`etcds://${etcd.endpoint}`, { tls: tlsOf(pki.ca, rootClient) });
      try {
        await asRoot.put(`${prefix}cn`, "root");
        expect((await asRoot.get(`${prefix}cn`))?.value).toBe("root");
        await asRoot.delete(`${prefix}cn`);
      } finally {
        await asRoot.close();
      }
      // CN=client is no etcd user: permission denied, explained.
      const asClient = openStore(`etcds://${etcd.endpoint}`, { tls: tlsOf(pki.ca) });
      try {
        const { error } = await failure(() => asClient.get(`${prefix}cn`));
        expect(error).toBeInstanceOf(EtcdAccessError);
        expect(error.message).toMatch(/permission denied: etcd has authentication enabled and no user was given/);
      } finally {
        await asClient.close();
      }
    });

    it("works with a client certificate and a user's password together", async () => {
      const store = openStore(`etcds://${etcd.endpoint}`, { tls: tlsOf(pki.ca), auth: { username: "capstan", password: "capstan-pw" } });
      try {
        await exerciseStore(store, `${prefix}cert-and-user/`);
      } finally {
        await store.close();
      }
    });
  });
});

describe("etcd users and passwords", () => {
  const password = "correct horse battery staple";
  let secureEtcd: EtcdProcess;
  let plainEtcd: EtcdProcess;
  beforeAll(async () => {
    // Server TLS only (no client certificates): the password is what identifies the client.
    secureEtcd = await startEtcd({ tls: server });
    plainEtcd = await startEtcd();
    for (const [etcd, tls] of [
      [secureEtcd, tlsOf(pki.ca, null)],
      [plainEtcd, undefined],
    ] as const) {
      const admin = adminClient(etcd, tls);
      try {
        await enableAuth(admin, { root: "root-pw", capstan: password });
      } finally {
        admin.close();
      }
    }
  });
  afterAll(async () => {
    await Promise.all([secureEtcd?.stop(), plainEtcd?.stop()]);
  });

  const cases = (): [string, EtcdProcess, StoreConnection["tls"]][] => [
    ["etcds://", secureEtcd, tlsOf(pki.ca, null)],
    ["etcd://", plainEtcd, undefined],
  ];

  it("works with the right password (a user granted read-write on every key), over etcds:// and etcd://", async () => {
    for (const [scheme, etcd, tls] of cases()) {
      const store = openStore(`${scheme}${etcd.endpoint}`, { ...(tls ? { tls } : {}), auth: { username: "capstan", password } });
      try {
        await exerciseStore(store, `${prefix}user/`);
        // Compaction (the StoreCompactor) is allowed to such a user too.
        await store.compact(await store.revision());
      } finally {
        await store.close();
      }
    }
  });

  it("fails quickly with a clear EtcdAccessError given a wrong password, an unknown user or no user", async () => {
    for (const [scheme, etcd, tls] of cases()) {
      const url = `${scheme}${etcd.endpoint}`;
      for (const [auth, message] of [
        [{ username: "capstan", password: "wrong password" }, /user "capstan": wrong user name or password/],
        [{ username: "nobody", password }, /user "nobody": wrong user name or password/],
        [undefined, /etcd has authentication enabled: give a user and its password/],
      ] as const) {
        const store = openStore(url, { ...(tls ? { tls } : {}), ...(auth ? { auth } : {}) });
        try {
          const { error, ms } = await failure(() => store.put(`${prefix}denied`, "1"));
          expect(error).toBeInstanceOf(EtcdAccessError);
          expect(error.message).toContain(`etcd put at ${url} failed: `);
          expect(error.message).toMatch(message);
          expect(error.message).not.toContain("wrong password");
          expect(error.message).not.toContain(password);
          expect(ms).toBeLessThan(3_000);
        } finally {
          await store.close();
        }
      }
    }
  });

  it("says so when a user is given to an etcd without authentication", async () => {
    const store = openStore(`etcd://${loadServices().etcdEndpoints[0]}`, { auth: { username: "capstan", password } });
    try {
      const { error } = await failure(() => store.get(`${prefix}x`));
      expect(error).toBeInstanceOf(EtcdAccessError);
      expect(error.message).toMatch(/user "capstan", but etcd has authentication disabled/);
    } finally {
      await store.close();
    }
  });
});
