// The registry conformance suite (conformance.ts) on the S3 driver against s3rver (scripts/services),
// each run under its own root directory in the services' bucket, so filesystem and S3 storage are
// held to the same workflows.
import { randomBytes } from "node:crypto";
import { S3Driver } from "../../../adapters/blobstore/s3.ts";
import { loadServices } from "../../helpers/services.ts";
import { registryConformance } from "./conformance.ts";
import type { DriverFactory } from "./harness.ts";

const s3Factory: DriverFactory = async () => {
  const s3 = loadServices().s3;
  if (!s3) throw new Error("no S3 server in the services env file: run 'scripts/services start' (it starts s3rver)");
  const rootDirectory = `/registry-${randomBytes(6).toString("hex")}`;
  const make = () =>
    new S3Driver({ accessKey: s3.accessKey, secretKey: s3.secretKey, region: s3.region, regionEndpoint: s3.endpoint, bucket: s3.bucket, secure: false, rootDirectory });
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
