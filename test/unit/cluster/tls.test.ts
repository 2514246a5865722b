// Building a DockerCluster with and without TLS material: the endpoint rules are checked, and the
// material is checked, before any engine is called (nothing here connects anywhere). Real TLS
// engines: test/integration/cluster/tls.test.ts.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCluster } from "../../../adapters/cluster/docker-cluster.ts";
import { tlsFailure, toClusterError } from "../../../adapters/cluster/engine.ts";
import { EngineUnavailableError } from "../../../adapters/cluster/errors.ts";
import { ClusterSpecError, type ClusterEndpoint } from "../../../adapters/cluster/spec.ts";
import { makePki, type Pki } from "../../helpers/certs.ts";

let pki: Pki;
let other: Pki;
let tls: { ca: string; cert: string; key: string };
let otherKey: string;

beforeAll(async () => {
  [pki, other] = await Promise.all([makePki(), makePki("other-ca")]);
  const [client, otherClient] = await Promise.all([pki.issue("client", { client: true }), other.issue("client", { client: true })]);
  tls = { ca: await readFile(pki.ca, "utf8"), cert: await readFile(client.cert, "utf8"), key: await readFile(client.key, "utf8") };
  otherKey = await readFile(otherClient.key, "utf8");
});

afterAll(async () => {
  await Promise.all([pki?.remove(), other?.remove()]);
});

describe("DockerCluster TLS", () => {
  it("builds TLS engines for tcp:// endpoints when given the material", () => {
    const c = DockerCluster.fromSpec("n1=tcp://10.0.0.2,n2=https://127.0.0.1:3376,n3=http://127.0.0.1:2375", { tls });
    expect(c.nodeNames).toEqual(["n1", "n2", "n3"]);
  });

  it("refuses non-loopback plain tcp without the material", () => {
    expect(() => DockerCluster.fromSpec("n1=tcp://10.0.0.2:2375")).toThrow(ClusterSpecError);
    expect(() => DockerCluster.fromSpec("n1=tcp://10.0.0.2:2375")).toThrow(/give -docker-tls-ca, -docker-tls-cert and -docker-tls-key/);
    expect(DockerCluster.fromSpec("n1=tcp://127.0.0.1:2375").nodeNames).toEqual(["n1"]);
  });

  it("checks endpoints made by hand too", () => {
    const plain: ClusterEndpoint = { name: "far", endpoint: "tcp://10.0.0.9:2375", transport: { kind: "tcp", host: "10.0.0.9", port: 2375, tls: false } };
    const secure: ClusterEndpoint = { name: "sec", endpoint: "https://10.0.0.9:2376", transport: { kind: "tcp", host: "10.0.0.9", port: 2376, tls: true } };
    expect(() => new DockerCluster([plain])).toThrow(/^node far: plain tcp:\/\/ to 10.0.0.9 is refused/);
    expect(() => new DockerCluster([plain], { tls })).toThrow(/^node far: plain tcp:\/\/ to 10.0.0.9 is refused/);
    expect(() => new DockerCluster([secure])).toThrow(/^node sec: https:\/\/10.0.0.9:2376 is a TLS endpoint but no TLS client material/);
    expect(new DockerCluster([secure], { tls }).nodeNames).toEqual(["sec"]);
  });

  it("refuses unusable material at once: a path instead of PEM, a key of another certificate", () => {
    expect(() => DockerCluster.fromSpec("n1=tcp://10.0.0.2", { tls: { ...tls, ca: pki.ca } })).toThrow(/TLS ca .* is not PEM text \(give the file's contents, not its path\)/);
    expect(() => DockerCluster.fromSpec("n1=tcp://10.0.0.2", { tls: { ...tls, key: otherKey } })).toThrow(ClusterSpecError);
    expect(() => DockerCluster.fromSpec("n1=tcp://10.0.0.2", { tls: { ...tls, key: otherKey } })).toThrow(/TLS material for the Docker engines is not usable: .*key values mismatch/);
  });
});

describe("TLS failures in words", () => {
  const err = (code: string, message: string, extra: object = {}) => Object.assign(new Error(message), { code, ...extra });
  const openssl = (reason: string) => `80AC01B1287F0000:error:0A000412:SSL routines:ssl3_read_bytes:${reason}:../deps/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 42\n`;

  it.each([
    [err("ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE", openssl("sslv3 alert bad certificate"), { reason: "sslv3 alert bad certificate" }), /^TLS handshake refused by the engine: it rejected our client certificate \(sslv3 alert bad certificate\); .*dockerd --tlscacert/],
    [err("ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED", openssl("tlsv13 alert certificate required")), /^TLS handshake refused by the engine: it rejected our client certificate \(tlsv13 alert certificate required\)/],
    [err("EPROTO", `write EPROTO ${openssl("tlsv1 alert unknown ca")}`), /^TLS handshake refused by the engine: it rejected our client certificate \(tlsv1 alert unknown ca\); .* \[EPROTO\]$/],
    [err("EPROTO", `write EPROTO ${openssl("wrong version number")}`), /^TLS handshake failed \(wrong version number\): the engine does not answer TLS on this port/],
    [err("UNABLE_TO_VERIFY_LEAF_SIGNATURE", "unable to verify the first certificate"), /^TLS: the engine's certificate is not signed by our CA \(unable to verify the first certificate\); .*-docker-tls-ca/],
    [err("SELF_SIGNED_CERT_IN_CHAIN", "self-signed certificate in certificate chain"), /^TLS: the engine's certificate is not signed by our CA/],
    [err("CERT_HAS_EXPIRED", "certificate has expired"), /^TLS: the engine's certificate failed verification \(certificate has expired\) \[CERT_HAS_EXPIRED\]$/],
    [err("ERR_TLS_CERT_ALTNAME_INVALID", "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1"), /^TLS: the engine's certificate is not for this address \(Hostname\/IP does not match/],
  ])("says what is wrong: %s", (e, message) => {
    expect(tlsFailure(e)).toMatch(message);
    const mapped = toClusterError(e, "n1", undefined, "nodes");
    expect(mapped).toBeInstanceOf(EngineUnavailableError);
    expect((mapped as Error).message).toMatch(/^nodes on n1: engine unreachable \(TLS/);
    expect((mapped as Error).message).not.toContain("\n");
  });

  it("leaves other failures as they were", () => {
    expect(tlsFailure(err("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1"))).toBeUndefined();
    expect(tlsFailure(err("EPROTO", "write EPROTO"))).toBeUndefined();
    expect(tlsFailure(new Error("x"))).toBeUndefined();
    expect((toClusterError(err("ECONNREFUSED", "connect ECONNREFUSED"), "n1", "c1", "inspect") as Error).message).toBe("inspect c1 on n1: engine unreachable (ECONNREFUSED)");
  });
});
