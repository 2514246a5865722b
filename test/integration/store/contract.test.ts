// The one Store contract suite, run against every implementation.
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { loadServices } from "../../helpers/services.ts";
import { describeStoreContract } from "./contract.ts";

describeStoreContract("EtcdStore", {
  open: async () => new EtcdStore({ endpoints: loadServices().etcdEndpoints }),
});
