// A benchmark stopped by SIGINT or SIGTERM removes what it started (servers, engines' containers,
// its work directory) before it exits with 130. `interrupted` tells the run that it is being torn
// down, so that what fails from then on is not reported as news.
export interface Interruption {
  readonly interrupted: boolean;
}

export function cleanUpOnSignals(what: string, cleanUp: () => Promise<void>): Interruption {
  const state = { interrupted: false };
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      state.interrupted = true;
      console.error(`${signal}: stopping ${what} and removing the work directory`);
      void cleanUp().finally(() => process.exit(130));
    });
  }
  return state;
}

/**
 * Run a benchmark's `main`, then clean up. After a signal the signal's handler cleans up and exits,
 * so a failure caused by the teardown is not thrown, and this waits for that exit.
 */
export async function runBench(main: () => Promise<void>, signals: Interruption, cleanUp: () => Promise<void>): Promise<void> {
  try {
    await main();
  } catch (err) {
    if (!signals.interrupted) throw err;
    await new Promise(() => {});
  } finally {
    if (!signals.interrupted) await cleanUp();
  }
}
