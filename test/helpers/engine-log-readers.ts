// The engine's side of a log stream, observed: how many file descriptors a test engine's dockerd
// holds on a container's json-file log. While the container runs, its log writer holds one; every
// log reader the engine runs (a `logs` request, follow or not) holds one more until the engine ends
// it. So "back to 1" means the engine has stopped reading for every client that was following.
// The engines of scripts/services run as root with a pid file, so /proc shows their descriptors.
import { readdir, readFile, readlink } from "node:fs/promises";
import Docker from "dockerode";
import { loadServices, socketPath } from "./services.ts";

const services = loadServices();

/** The json-file log of a container on a test engine. */
export async function logPathOf(node: string, id: string): Promise<string> {
  const endpoint = services.engines[node];
  if (endpoint === undefined) throw new Error(`no test engine ${node}`);
  const info = await new Docker({ socketPath: socketPath(endpoint) }).getContainer(id).inspect({ abortSignal: AbortSignal.timeout(10_000) });
  if (!info.LogPath) throw new Error(`container ${id} on ${node} has no log file (log driver ${info.HostConfig.LogConfig?.Type})`);
  return info.LogPath;
}

/** Descriptors the engine of `node` holds open on `logPath`. */
export async function engineDescriptorsOn(node: string, logPath: string): Promise<number> {
  const pid = (await readFile(`${services.dir}/${node}/docker.pid`, "utf8")).trim();
  const dir = `/proc/${pid}/fd`;
  let n = 0;
  for (const fd of await readdir(dir)) {
    // A descriptor closed between the listing and the readlink is simply not counted.
    const target = await readlink(`${dir}/${fd}`).catch(() => "");
    if (target === logPath) n++;
  }
  return n;
}
