import { describe, expect, it } from "vitest";
import { countExit, countFailure, wantsRestart } from "../../../controllers/shared/restart.ts";
import { defaultRestartBackoff as b, restartDelayMs, type RestartRecord } from "../../../controllers/shared/backoff.ts";

describe("restart back-off", () => {
  it("doubles from 1 s and caps at 5 min", () => {
    expect([1, 2, 3, 4, 9, 10, 50].map((n) => restartDelayMs(n, b))).toEqual([1_000, 2_000, 4_000, 8_000, 256_000, 300_000, 300_000]);
    expect(restartDelayMs(10_000, b)).toBe(300_000);
  });

  it("restart policies: never never, onfail on a non-zero (or unknown) exit, always always", () => {
    expect([0, 3, undefined].map((c) => wantsRestart("never", c))).toEqual([false, false, false]);
    expect([0, 3, 137, undefined].map((c) => wantsRestart("onfail", c))).toEqual([false, true, true, true]);
    expect([0, 3].map((c) => wantsRestart("always", c))).toEqual([true, true]);
  });
});

describe("countExit", () => {
  const exit = { key: "c1#0", exitCode: 3, oomKilled: false, startedAt: 10_000, finishedAt: 11_000 };

  it("counts an exit once, schedules the restart from the exit time, and says when", () => {
    const r1 = countExit<RestartRecord>({ restarts: 0, failures: 0 }, exit, "onfail", 11_500, b);
    expect(r1).toMatchObject({ failures: 1, nextAttemptAt: 12_000, lastExit: "c1#0" });
    expect(r1.lastError).toBe(`exited with code 3; restart 1 at ${new Date(12_000).toISOString()}`);
    expect(countExit(r1, exit, "onfail", 50_000, b)).toBe(r1); // seen again: unchanged
    const r2 = countExit({ ...r1, restarts: 1 }, { ...exit, key: "c1#1", startedAt: 12_000, finishedAt: 12_100 }, "onfail", 12_200, b);
    expect(r2).toMatchObject({ failures: 2, nextAttemptAt: 14_100 });
  });

  it("judges an exit again when the policy changes, without counting it twice (every transition)", () => {
    const policies = ["never", "onfail", "always"] as const;
    for (const code of [0, 3]) {
      for (const from of policies) {
        for (const to of policies) {
          const e = { ...exit, exitCode: code };
          const before = countExit<RestartRecord>({ restarts: 0, failures: 0 }, e, from, 11_500, b);
          const after = countExit(before, e, to, 20_000, b);
          const what = `exit ${code}, ${from} -> ${to}`;
          expect(after.failures, what).toBe(1);
          expect(after.nextAttemptAt !== undefined, what).toBe(wantsRestart(to, code));
          if (from === to) expect(after, what).toBe(before);
          else expect(after.lastError, what).toContain(wantsRestart(to, code) ? "restart 1 at" : `restart policy ${to}: not restarted`);
        }
      }
    }
    // A record written before the policy was kept (no lastExitPolicy) is judged once more, then kept.
    const old: RestartRecord = { restarts: 0, failures: 1, lastExit: exit.key, lastError: "x" };
    const judged = countExit(old, { ...exit, exitCode: 0 }, "always", 20_000, b);
    expect(judged).toMatchObject({ failures: 1, lastExitPolicy: "always" });
    expect(judged.nextAttemptAt).toBeDefined();
    expect(countExit(judged, { ...exit, exitCode: 0 }, "always", 30_000, b)).toBe(judged);
  });

  it("starts the back-off over after a run of resetAfterMs", () => {
    const long = { ...exit, startedAt: 0, finishedAt: b.resetAfterMs };
    expect(countExit({ restarts: 7, failures: 9 }, long, "always", b.resetAfterMs, b)).toMatchObject({ failures: 1, nextAttemptAt: b.resetAfterMs + 1_000 });
  });

  it("under a policy that does not restart, records the reason and no attempt time", () => {
    const r = countExit<RestartRecord>({ restarts: 0, failures: 0, nextAttemptAt: 5 }, { ...exit, exitCode: 0 }, "onfail", 11_500, b);
    expect(r.nextAttemptAt).toBeUndefined();
    expect(r.lastError).toBe("exited with code 0; restart policy onfail: not restarted");
  });

  it("an OOM kill reads as such", () => {
    expect(countExit<RestartRecord>({ restarts: 0, failures: 0 }, { ...exit, exitCode: 137, oomKilled: true }, "always", 11_000, b).lastError).toMatch(
      /^exited with code 137 \(out of memory\); restart 1 at/,
    );
  });

  it("a failed deploy delays the next deploy, a failed start the next start, on the same back-off", () => {
    const r = countFailure({ restarts: 2, failures: 3 }, "image not found", "deploy", 1_000, b);
    expect(r).toEqual({ restarts: 2, failures: 4, nextDeployAt: 9_000, lastError: expect.stringMatching(/^image not found; next attempt at /) });
    expect(countFailure(r, "start failed", "start", 2_000, b)).toMatchObject({ failures: 5, nextDeployAt: 9_000, nextAttemptAt: 18_000 });
  });
});
