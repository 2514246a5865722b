// One Secret-sync per store (docs/secret-sync.md, "Leadership"): a `capstan up` and a separate
// `capstan secrets` on one embedded store both campaign for the secrets leader key, so exactly one
// of them runs Secret-sync; killing that one (kill -9) hands it to the other.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startCapstan, type CapstanProcess } from "../helpers/capstan-process.ts";
import { pollUntil } from "../helpers/poll.ts";
import { loadServices } from "../helpers/services.ts";

const services = loadServices();
const dir = mkdtempSync(join(tmpdir(), "capstan-secret-sync-leader-"));
const home = mkdtempSync(join(tmpdir(), "capstan-home-"));
const env = { HOME: home };
const processes: CapstanProcess[] = [];

/** leader_election_master_status of the secrets leader key in this process: 1 leading, 0 not, undefined unreachable. */
async function holdsSecretSync(p: CapstanProcess): Promise<number | undefined> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return undefined;
  const text = await (await fetch(`${p.url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const m = /^leader_election_master_status\{name="\/platform\/secret-sync\/leader"\} (\d)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe("Secret-sync under capstan up and capstan secrets on one store", () => {
  it("exactly one process runs it, and killing that one hands it to the other", async () => {
    const lease = ["-lease-duration", "3s"];
    const up = await startCapstan("up", ["-data", dir, "-registry-web", "", "-unseal-key-file", "", "-cluster", services.cluster, ...lease], env);
    processes.push(up);
    const secrets = await startCapstan("secrets", ["-store", `sqlite://${dir}/state.db`, "-cluster", services.cluster, ...lease], env);
    processes.push(secrets);

    const both = () => Promise.all([holdsSecretSync(up), holdsSecretSync(secrets)]);
    const [u, s] = await pollUntil("one Secret-sync leader", async () => {
      const v = await both();
      return v[0] !== undefined && v[1] !== undefined && v[0] + v[1] === 1 ? v : undefined;
    }, 20_000);
    expect(await both()).toEqual([u, s]);
    // The orchestrator's key is up's alone, whatever happens to the secrets key.
    const upMetrics = await (await fetch(`${up.url}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    expect(upMetrics).toMatch(/^leader_election_master_status\{name="\/platform\/orchestrator\/leader"\} 1$/m);

    const [leader, follower] = u === 1 ? [up, secrets] : [secrets, up];
    leader.child.kill("SIGKILL");
    await leader.exited;
    const startedAt = Date.now();
    await pollUntil("the other process takes Secret-sync over", async () => (await holdsSecretSync(follower)) === 1, 15_000);
    // Within the lease (3 s) plus a follower's retry period.
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(follower.log()).not.toMatch(/stopped on a failure/);
  }, 90_000);
});
