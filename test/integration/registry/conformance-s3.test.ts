// The registry conformance suite (conformance.ts) on the S3 driver against s3rver (scripts/services),
// each run under its own root directory in the services' bucket, so filesystem and S3 storage are
// held to the same workflows.
import { randomBytes } from "node:crypto";
import { S3Driver } from "../../../adapters/blobstore/s3.ts";
import { s3DriverOptions } from "../../helpers/services.ts";
import { registryConformance } from "./conformance.ts";
import type { DriverFactory } from "./harness.ts";

const s3Factory: DriverFactory = async () => {
  const rootDirectory = `/registry-${randomBytes(6).toString("hex")}`;
  const make = () => new S3Driver(s3DriverOptions(rootDirectory));
  const driver = make();
  return {
    driver,
    reopen: async () => make(),
    cleanup: async () => {
      await driver.delete("/").catch(() => undefined);
      await driver.close();
    },
  };
};

registryConformance("s3", s3Factory);
