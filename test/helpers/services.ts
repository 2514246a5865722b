// Where the real services started by `scripts/services start` are: integration tests and benchmarks
// read the env file it writes. A test never starts shared services itself; it fails with a clear
// message when they are missing, so a green run always means the real thing was exercised.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import type { S3DriverOptions } from "../../adapters/blobstore/s3.ts";

const run = promisify(execFile);

export interface Services {
  dir: string;
  /** host:port of the shared etcd. */
  etcdEndpoints: string[];
  /** Engines by node name, e.g. {n1: "unix:///tmp/capstan-services/n1/docker.sock"}. */
  engines: Record<string, string>;
  /** The `-cluster` form: "n1=unix:///...,n2=unix:///...". */
  cluster: string;
  testImage: string;
  /** The S3 server (s3rver) for the registry's S3 storage, when `scripts/services start` ran it. */
  s3?: S3Service;
}

export interface S3Service {
  /** e.g. "http://127.0.0.1:45565" (path-style requests). */
  endpoint: string;
  accessKey: string;
  secretKey: string;
  region: string;
  /** A bucket that exists; tests use a unique rootdirectory (or bucket) of their own. */
  bucket: string;
}

export const servicesScript = fileURLToPath(new URL("../../scripts/services", import.meta.url));

export function loadServices(): Services {
  const envPath =
    process.env.CAPSTAN_SERVICES_ENV ??
    `${process.env.CAPSTAN_SERVICES_DIR ?? "/tmp/capstan-services"}/services.env`;
  let text: string;
  try {
    text = readFileSync(envPath, "utf8");
  } catch {
    throw new Error(`no services env file at ${envPath}: run 'scripts/services start' first`);
  }
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) env[line.slice(0, i)] = line.slice(i + 1);
  }
  const cluster = env.CAPSTAN_CLUSTER ?? "";
  const engines: Record<string, string> = {};
  for (const part of cluster.split(",").filter(Boolean)) {
    const i = part.indexOf("=");
    engines[part.slice(0, i)] = part.slice(i + 1);
  }
  return {
    dir: env.CAPSTAN_SERVICES_DIR ?? "/tmp/capstan-services",
    etcdEndpoints: (env.CAPSTAN_ETCD_ENDPOINTS ?? "").split(",").filter(Boolean),
    engines,
    cluster,
    testImage: env.CAPSTAN_TEST_IMAGE ?? "capstan/busybox:latest",
    s3: env.CAPSTAN_S3_ENDPOINT
      ? {
          endpoint: env.CAPSTAN_S3_ENDPOINT,
          accessKey: env.CAPSTAN_S3_ACCESS_KEY ?? "S3RVER",
          secretKey: env.CAPSTAN_S3_SECRET_KEY ?? "S3RVER",
          region: env.CAPSTAN_S3_REGION ?? "us-east-1",
          bucket: env.CAPSTAN_S3_BUCKET ?? "capstan-test",
        }
      : undefined,
  };
}

/** Run a `scripts/services` verb (e.g. "restart-engine", "n1", "3"). */
export async function servicesCommand(...args: string[]): Promise<void> {
  await run(servicesScript, args, { timeout: 120_000 });
}

/** Socket path of an engine from its unix:// endpoint. */
export function socketPath(endpoint: string): string {
  return endpoint.replace(/^unix:\/\//, "");
}

/** A short random suffix so each test's keys and containers are its own. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 7)}`;
}

/** The S3 server `scripts/services start` runs, or an error saying how to get it. */
export function s3Service(): S3Service {
  const s3 = loadServices().s3;
  if (!s3) throw new Error("no S3 server in the services env file: run 'scripts/services start' (it starts s3rver)");
  return s3;
}

/** S3Driver options for the services' s3rver, below `rootDirectory` of its bucket. */
export function s3DriverOptions(rootDirectory: string, more: Partial<S3DriverOptions> = {}, s3: S3Service = s3Service()): S3DriverOptions {
  return { accessKey: s3.accessKey, secretKey: s3.secretKey, region: s3.region, regionEndpoint: s3.endpoint, bucket: s3.bucket, secure: false, rootDirectory, ...more };
}
