// `capstan up`: every component in one process, on the embedded store by default.
//
// What runs today: the store (with its compactor), leader election (trivially single-process on
// the embedded store; a real fenced lease on etcd), the cluster adapter checked against every
// engine, and the manager's /healthz, /readyz and /metrics. Components join this process as they
// are built (orchestrator, secrets, console, registry).
import { hostname } from "node:os";
import { mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { Registry } from "prom-client";
import { DockerCluster } from "../../adapters/cluster/index.ts";
import { openStore } from "../../adapters/store/open.ts";
import { StoreCompactor } from "../../runtime/compactor.ts";
import { LeaderElector, SingleProcessElector } from "../../runtime/leaderelection.ts";
import { createLogger } from "../../runtime/log.ts";
import { Manager } from "../../runtime/manager.ts";
import { parseListenAddress } from "../listen.ts";
import { parseArgs, usage, type OptionDef } from "../options.ts";

const defs: OptionDef[] = [
  { name: "web", type: "string", help: "listen address for the HTTP APIs and probes", default: ":9000" },
  { name: "data", type: "string", help: "data directory of the embedded store", default: "./capstan-data" },
  { name: "store", type: "string", help: "store URL: sqlite://PATH or etcd://HOST:PORT[,HOST:PORT] (default sqlite://DATA/state.db)" },
  { name: "cluster", type: "string", help: "Docker engines: [NAME=]unix:///path.sock or tcp://host:port, comma-separated", default: "unix:///var/run/docker.sock" },
  { name: "history", type: "duration", help: "store history kept for watches to resume from", default: "10m" },
];

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, defs);
  if (args.help) {
    process.stdout.write(usage("up", "Runs every Capstan component in one process.", defs));
    return 0;
  }
  const o = args.options as { web: string; data: string; store?: string; cluster: string; history: number };
  const log = createLogger("capstan");
  const listen = parseListenAddress(o.web);
  let storeUrl = o.store;
  if (!storeUrl) {
    mkdirSync(o.data, { recursive: true });
    storeUrl = `sqlite://${o.data}/state.db`;
  }
  const store = openStore(storeUrl);
  const cluster = DockerCluster.fromSpec(o.cluster, { logger: log });

  const identity = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  const leaderKey = "/platform/up/leader";
  const registry = new Registry();
  const manager: Manager = new Manager({
    name: "capstan",
    http: listen,
    log,
    registry,
    elector: storeUrl.startsWith("etcd://")
      ? new LeaderElector({ store, key: leaderKey, identity, log, registry })
      : new SingleProcessElector({ store, key: leaderKey, identity, log, registry }),
  });
  manager.add(new StoreCompactor({ store, retentionMs: o.history, log, registry }));

  for (const node of await cluster.nodes()) {
    log.info(
      { node: node.name, endpoint: node.endpoint, state: node.state, cpus: node.cpus, memoryBytes: node.memoryBytes, error: node.error },
      "cluster node",
    );
  }
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, "shutting down");
    void manager.stop();
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  try {
    await manager.start();
    log.info({ address: manager.address(), store: store.description }, "capstan is up");
  } catch {
    // finished() carries the error; the manager has stopped what it started.
  }
  const exit = await manager.finished();
  await store.close();
  if (exit.code !== 0) log.error({ err: exit.error }, "capstan stopped on a failure");
  return exit.code;
}
