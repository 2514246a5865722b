// The one Store contract suite, run against every implementation: EtcdStore on the shared etcd,
// SqliteStore on a fresh database file.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";
import { loadServices } from "../../helpers/services.ts";
import { describeStoreContract } from "./contract.ts";

describeStoreContract("EtcdStore", {
  open: async () => new EtcdStore({ endpoints: loadServices().etcdEndpoints }),
});

let dir = "";
describeStoreContract("SqliteStore", {
  open: async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-store-"));
    return new SqliteStore({ path: join(dir, "state.db") });
  },
  dispose: () => rm(dir, { recursive: true, force: true }),
});
