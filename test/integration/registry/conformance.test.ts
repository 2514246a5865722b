// The registry conformance suite (conformance.ts) on the filesystem driver, each run on a fresh
// temporary root. Another driver runs the same suite with its own factory:
// `registryConformance("s3", async () => ({ driver, reopen, cleanup }))`.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FilesystemDriver } from "../../../adapters/blobstore/filesystem.ts";
import { registryConformance } from "./conformance.ts";
import type { DriverFactory } from "./harness.ts";

export { registryConformance };

export const filesystemFactory: DriverFactory = async () => {
  const root = await mkdtemp(join(tmpdir(), "capstan-registry-"));
  return {
    driver: new FilesystemDriver({ rootDirectory: root }),
    reopen: async () => new FilesystemDriver({ rootDirectory: root }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
};

registryConformance("filesystem", filesystemFactory);
