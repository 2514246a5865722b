// The network manager plug-in slot (docs/cluster.md, "Capabilities"): a manager may adjust a container's create spec
// (join an overlay, reserve an address) and release what it reserved when the container is removed.
// The no-op manager is the working one: containers use the network mode their spec names.
import type { ContainerRef, CreateSpec } from "./cluster.ts";

export interface NetworkManager {
  readonly name: string;
  /** The spec to create the container with. Called before every create. */
  prepare(node: string, containerName: string, spec: CreateSpec): Promise<CreateSpec>;
  /** Called after a container is removed. */
  release(ref: ContainerRef): Promise<void>;
}

export const noopNetworkManager: NetworkManager = {
  name: "noop",
  prepare: (_node, _containerName, spec) => Promise.resolve(spec),
  release: () => Promise.resolve(),
};
