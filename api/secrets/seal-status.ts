// The seal state, published for other processes (docs/secrets.md, "Seeing the seal"): the
// master key lives in one process's memory, so an orchestrator elsewhere cannot ask the vault.
// The secrets leader (the process that runs Secret-sync: only its seal decides whether secret
// files get installed) writes {sealed, at} to sealStatusKey when it starts leading and after every
// seal and unseal; the PodGroup controller reads it to say why a group waits for its secret files.
// A leader that dies leaves its last word; the next one writes its own as it starts leading.
import type { Store } from "../../adapters/store/store.ts";
import type { Logger } from "../../runtime/log.ts";
import type { Vault } from "./vault.ts";

/** The record's key (controllers/podgroup/secret-marker.ts reads it from its stored form). */
export const sealStatusKey = "/platform/secret-sync/seal/status";
const retryMs = 1_000;

export class SealStatusPublisher {
  readonly name = "secrets-seal-status";

  constructor(
    /** The fenced store: only the leader writes. */
    private readonly store: Store,
    private readonly vault: Vault,
    private readonly log: Logger,
  ) {}

  async start(signal: AbortSignal): Promise<void> {
    let dirty = true;
    let wake: (() => void) | undefined;
    const poke = () => {
      dirty = true;
      wake?.();
    };
    const off = [this.vault.onSeal(poke), this.vault.onUnseal(poke)];
    signal.addEventListener("abort", poke, { once: true });
    try {
      while (!signal.aborted) {
        let delay: number | undefined;
        if (dirty) {
          dirty = false;
          const sealed = this.vault.sealed();
          try {
            await this.store.put(sealStatusKey, JSON.stringify({ sealed, at: new Date().toISOString() }));
          } catch (err) {
            if (signal.aborted) break;
            this.log.warn({ err }, "could not publish the seal state; retrying");
            dirty = true;
            delay = retryMs;
          }
        }
        if (signal.aborted) break;
        await new Promise<void>((resolve) => {
          const timer = delay === undefined ? undefined : setTimeout(resolve, delay);
          wake = () => {
            if (timer !== undefined) clearTimeout(timer);
            resolve();
          };
          if (dirty && delay === undefined) resolve();
        });
        wake = undefined;
      }
    } finally {
      for (const f of off) f();
      signal.removeEventListener("abort", poke);
    }
  }
}
