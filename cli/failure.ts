// How client commands end on an expected failure: one line (or a few) on stderr that says what the
// server or the input said, and exit code 1. Anything else is a bug and is rethrown with its stack.
import { AppDefinitionError } from "../api/appdef/index.ts";
import { ApiError, ServerCertificateError, ServerUnreachableError } from "./http-errors.ts";
import { ClientConfigError } from "./client-config.ts";

/** A failure the command detected itself (e.g. apply of a group that is being deleted). */
export class CommandFailure extends Error {
  override readonly name = "CommandFailure";
}

/** Print `e` for the user and answer the exit code (1); rethrow what is not an expected failure. */
export function reportFailure(command: string, e: unknown): number {
  let text: string;
  if (e instanceof ApiError) {
    text = e.describe();
    if (e.status === 401) text += "\n  (the token: -token, CAPSTAN_TOKEN, or the one capstan login CLUSTER saved; see capstan whoami)";
  } else if (e instanceof ServerCertificateError) text = e.message;
  else if (e instanceof ServerUnreachableError) {
    const hint =
      e.component === "orchestrator"
        ? "set it with -server, CAPSTAN_SERVER or server: in ~/.capstan/config.yaml"
        : `set it with capstan login CLUSTER -${e.component === "console" ? "console" : "secrets"} URL`;
    text = `${e.message} (${hint})`;
  } else if (e instanceof ClientConfigError || e instanceof CommandFailure) text = e.message;
  else if (e instanceof AppDefinitionError) text = `${e.file} is not a valid application definition:\n${e.problems.map((p) => `  ${p}`).join("\n")}`;
  else throw e;
  process.stderr.write(`capstan ${command}: ${text}\n`);
  return 1;
}
