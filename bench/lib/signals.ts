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
