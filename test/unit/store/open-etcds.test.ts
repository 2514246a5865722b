// openStore's etcds:// scheme and StoreConnection, and how EtcdStore explains TLS and
// authentication failures. No connection is made here (test/integration/store/etcd-tls.test.ts
// talks to a real etcd).
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdAuthenticationFailedError, EtcdPermissionDeniedError, GRPCInvalidArgumentError } from "etcd3";
import { accessFailureHint, EtcdStore, tlsFailureHint } from "../../../adapters/store/etcd.ts";
import { openStore, StoreUrlError } from "../../../adapters/store/open.ts";
import { makePki, type IssuedCert, type Pki } from "../../helpers/certs.ts";

let pki: Pki;
let client: IssuedCert;
const read = (path: string) => readFileSync(path, "utf8");

beforeAll(async () => {
  pki = await makePki();
  client = await pki.issue("client", { client: true });
});
afterAll(() => pki?.remove());

function urlError(fn: () => unknown): StoreUrlError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(StoreUrlError);
    return e as StoreUrlError;
  }
  throw new Error("expected a StoreUrlError");
}

describe("openStore with etcds:// and a StoreConnection", () => {
  it("opens an EtcdStore over TLS on every listed endpoint, with or without TLS material", async () => {
    for (const connection of [undefined, {}, { tls: { ca: read(pki.ca) } }, { tls: { ca: read(pki.ca), cert: read(client.cert), key: read(client.key) } }]) {
      const store = openStore("etcds://127.0.0.1:2379,etcd-2.local:32379", connection);
      expect(store).toBeInstanceOf(EtcdStore);
      expect(store.description).toBe("etcds://127.0.0.1:2379,etcd-2.local:32379");
      await store.close();
    }
    const upper = openStore("ETCDS://127.0.0.1:2379");
    expect(upper.description).toBe("etcds://127.0.0.1:2379");
    await upper.close();
  });

  it("takes a user and password with both etcd schemes, and never shows the password", async () => {
    for (const url of ["etcd://127.0.0.1:2379", "etcds://127.0.0.1:2379"]) {
      const store = openStore(url, { auth: { username: "capstan", password: "hunter2-secret" } });
      expect(store.description).toBe(url);
      expect(store.description).not.toContain("hunter2");
      await store.close();
    }
  });

  it("refuses TLS material with etcd:// and any connection setting with sqlite://", () => {
    expect(urlError(() => openStore("etcd://127.0.0.1:2379", { tls: { ca: read(pki.ca) } })).message).toMatch(
      /TLS settings \(a CA or a client certificate\) need an etcds:\/\/ URL/,
    );
    expect(urlError(() => openStore("sqlite://:memory:", { auth: { username: "u", password: "p" } })).message).toMatch(
      /TLS and user settings apply only to etcd:\/\/ and etcds:\/\/ stores/,
    );
    expect(urlError(() => openStore("sqlite://:memory:", { tls: {} })).message).toMatch(/apply only to etcd/);
  });

  it.each([
    ["etcds://", /no etcd endpoint/],
    ["etcds://127.0.0.1", /"127.0.0.1" is not host:port/],
    ["etcds://user:pw@127.0.0.1:2379", /is not host:port/],
    ["etcds://127.0.0.1:0", /not host:port/],
  ])("refuses %j with an error naming the URL", (url, reason) => {
    const error = urlError(() => openStore(url));
    expect(error.url).toBe(url);
    expect(error.message).toMatch(reason);
    expect(error.message).toContain("etcds://host:port");
  });
});

describe("EtcdStore TLS and auth settings", () => {
  it("refuses a client certificate without its key and the reverse", () => {
    expect(() => new EtcdStore({ endpoints: ["127.0.0.1:2379"], tls: { cert: read(client.cert) } })).toThrow(
      /a client certificate needs its key/,
    );
    expect(() => new EtcdStore({ endpoints: ["127.0.0.1:2379"], tls: { key: read(client.key) } })).toThrow(/a client key needs its certificate/);
  });

  it("refuses unusable TLS material when built, not at the first call", () => {
    expect(() => new EtcdStore({ endpoints: ["127.0.0.1:2379"], tls: { cert: read(client.cert), key: read(pki.caKey) } })).toThrow(
      /etcd TLS: the CA, client certificate or key is not usable/,
    );
  });

  it("refuses an empty user name", () => {
    expect(() => new EtcdStore({ endpoints: ["127.0.0.1:2379"], auth: { username: "", password: "p" } })).toThrow(/user name is empty/);
  });
});

describe("failure explanations", () => {
  const tls = { tls: true, clientCert: true };
  it("says when etcd refused our client certificate, or wanted one", () => {
    const detail = "14 UNAVAILABLE: No connection established. Last error: 80:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:SSL alert number 42";
    expect(tlsFailureHint(detail, tls)).toMatch(/^etcd refused our TLS client certificate: .*--trusted-ca-file/);
    expect(tlsFailureHint(detail, { tls: true, clientCert: false })).toMatch(/^etcd requires a TLS client certificate \(--client-cert-auth\) and none was given/);
    expect(tlsFailureHint("... alert certificate required ...", { tls: true, clientCert: false })).toMatch(/requires a TLS client certificate/);
  });

  it("says when etcd's server certificate is not trusted", () => {
    for (const detail of [
      "Last error: Error: unable to verify the first certificate",
      "Last error: Error: self-signed certificate in certificate chain",
      "Last error: Error: certificate has expired",
      "Last error: Error [ERR_TLS_CERT_ALTNAME_INVALID]: Hostname/IP does not match certificate's altnames",
    ]) {
      expect(tlsFailureHint(detail, tls)).toMatch(/^etcd's server certificate is not trusted: .*-store-ca/);
    }
  });

  it("says when a TLS client meets a plain endpoint, or a plain client a TLS one", () => {
    expect(tlsFailureHint("Last error: Error: Client network socket disconnected before secure TLS connection was established", tls)).toMatch(
      /does not speak TLS \(use etcd:\/\/ for a plain etcd\)/,
    );
    expect(tlsFailureHint("No connection established. Last error: Failed to connect (2026-01-01). Resolution note: ", { tls: false, clientCert: false })).toMatch(
      /if this etcd serves TLS, use etcds:\/\//,
    );
  });

  it("leaves other failures alone", () => {
    expect(tlsFailureHint("Last error: Error: connect ECONNREFUSED 127.0.0.1:1", tls)).toBeUndefined();
    expect(tlsFailureHint("Last error: Error: connect ECONNREFUSED 127.0.0.1:1", { tls: false, clientCert: false })).toBeUndefined();
    expect(accessFailureHint(new Error("etcdserver: mvcc: required revision has been compacted"), "u")).toBeUndefined();
  });

  it("explains etcd's refusals of a user", () => {
    const failed = new EtcdAuthenticationFailedError("3 INVALID_ARGUMENT: etcdserver: authentication failed, invalid user ID or password");
    expect(accessFailureHint(failed, "capstan")).toMatch(/^user "capstan": wrong user name or password \(-store-user, -store-password-file or CAPSTAN_STORE_PASSWORD\)/);
    const denied = new EtcdPermissionDeniedError("7 PERMISSION_DENIED: etcdserver: permission denied");
    expect(accessFailureHint(denied, "capstan")).toMatch(/^permission denied: user "capstan" lacks read-write on every key, from the key \\0 on/);
    expect(accessFailureHint(denied, undefined)).toMatch(/^permission denied: etcd has authentication enabled and no user was given/);
    expect(accessFailureHint(new GRPCInvalidArgumentError("3 INVALID_ARGUMENT: etcdserver: user name is empty"), undefined)).toMatch(
      /^etcd has authentication enabled: give a user and its password/,
    );
    expect(accessFailureHint(new Error("9 FAILED_PRECONDITION: etcdserver: authentication is not enabled"), "capstan")).toMatch(
      /^user "capstan", but etcd has authentication disabled/,
    );
  });
});
