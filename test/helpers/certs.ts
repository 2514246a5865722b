// Certificates made for one test run with the real `openssl` command: a CA, and server and client
// certificates it signs. Nothing is checked in; every file lives in a fresh temporary directory
// that `remove()` deletes.
//
//   const pki = await makePki();
//   const server = await pki.issue("server", { dns: ["localhost"], ip: ["127.0.0.1"] });
//   const client = await pki.issue("client", { client: true });
//   const other = await makePki();           // a second, unrelated CA (the "wrong CA" case)
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface IssuedCert {
  cert: string;
  key: string;
}

export interface IssueOptions {
  /** subjectAltName DNS entries (server certificates). */
  dns?: string[];
  /** subjectAltName IP entries (server certificates). */
  ip?: string[];
  /** A client certificate (extendedKeyUsage clientAuth) instead of a server one. */
  client?: boolean;
  /** Days of validity (default 2); a negative start is not possible with `openssl x509`, see expired. */
  days?: number;
}

export interface Pki {
  dir: string;
  /** The CA's certificate (PEM file path). */
  ca: string;
  caKey: string;
  /** A certificate and key (PEM file paths) signed by this CA; `name` names the files. */
  issue(name: string, opts?: IssueOptions): Promise<IssuedCert>;
  remove(): Promise<void>;
}

async function openssl(args: string[]): Promise<void> {
  await run("openssl", args, { timeout: 30_000 });
}

export async function makePki(name = "capstan-test-ca"): Promise<Pki> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-pki-"));
  const ca = join(dir, "ca.pem");
  const caKey = join(dir, "ca-key.pem");
  await openssl([
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", caKey, "-out", ca, "-days", "2", "-subj", `/CN=${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  let serial = 1;
  return {
    dir,
    ca,
    caKey,
    async issue(certName, opts = {}) {
      const key = join(dir, `${certName}-key.pem`);
      const csr = join(dir, `${certName}.csr`);
      const cert = join(dir, `${certName}.pem`);
      const ext = join(dir, `${certName}.ext`);
      const san = [...(opts.dns ?? []).map((d) => `DNS:${d}`), ...(opts.ip ?? []).map((i) => `IP:${i}`)];
      const lines = [
        "basicConstraints=CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        `extendedKeyUsage=${opts.client ? "clientAuth" : "serverAuth"}`,
        ...(san.length > 0 ? [`subjectAltName=${san.join(",")}`] : []),
      ];
      await writeFile(ext, `${lines.join("\n")}\n`);
      await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr, "-subj", `/CN=${certName}`]);
      await openssl([
        "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial", String(serial++),
        "-out", cert, "-days", String(opts.days ?? 2), "-extfile", ext,
      ]);
      return { cert, key };
    },
    async remove() {
      await rm(dir, { recursive: true, force: true });
    },
  };
}
