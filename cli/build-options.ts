// What `capstan build`, `test` and `release` share (docs/build.md): the definition file, the
// source directory, the engine, and how their failures end the command.
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parseAppDefinition, type AppDefinition } from "../api/appdef/index.ts";
import { BuildError, connectEngine } from "../adapters/build/docker.ts";
import type { PipelineContext } from "../adapters/build/pipeline.ts";
import { RegistryError } from "../adapters/build/registry-error.ts";
import { CommandFailure, reportFailure } from "./failure.ts";
import type { OptionDef, OptionValues } from "./options.ts";

export const buildOptionDefs: OptionDef[] = [
  { name: "file", short: "f", type: "string", help: "the application definition (YAML)", default: "app.yaml" },
  { name: "C", type: "string", help: "the source directory, copied to /platform/app (default: the definition file's directory)" },
  { name: "docker", type: "string", help: "the Docker engine: unix:///PATH or tcp://HOST:PORT (default: DOCKER_HOST, else /var/run/docker.sock)" },
  { name: "script-timeout", type: "duration", help: "longest a prepare, build or test script may run", default: "30m" },
];

export interface Loaded {
  definition: AppDefinition;
  text: string;
  file: string;
  ctx: PipelineContext;
}

/** Read and check the definition; the pipeline context with the engine and output to stdout/stderr. */
export async function loadBuild(command: string, o: OptionValues, scriptStdout: "stdout" | "stderr" = "stderr"): Promise<Loaded> {
  const file = String(o.file);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    throw new CommandFailure(`-f ${file}: ${(e as Error).message}`);
  }
  const { definition, warnings } = parseAppDefinition(text, file);
  for (const w of warnings) process.stderr.write(`capstan ${command}: warning: ${w}\n`);
  const sourceDir = resolve(typeof o.C === "string" && o.C !== "" ? o.C : dirname(file));
  const docker = connectEngine(typeof o.docker === "string" && o.docker !== "" ? o.docker : undefined);
  return {
    definition,
    text,
    file,
    ctx: {
      docker,
      def: definition,
      sourceDir,
      // build and release print their result on stdout, so a script's output goes to stderr there.
      out: (t, stream) => (stream === "stdout" && scriptStdout === "stdout" ? process.stdout : process.stderr).write(t),
      scriptTimeoutMs: o["script-timeout"] as number,
    },
  };
}

/** A build failure ends the command with its code (a script's own exit code); others as every command. */
export function reportBuildFailure(command: string, e: unknown): number {
  if (e instanceof BuildError || e instanceof RegistryError) {
    process.stderr.write(`capstan ${command}: ${e.message}\n`);
    return e instanceof BuildError ? e.code : 1;
  }
  const err = e as { statusCode?: number; message?: string; code?: string };
  // The engine's answers (dockerode) and an unreachable engine: one line, exit 1.
  if (typeof err?.statusCode === "number" || err?.code === "ECONNREFUSED" || err?.code === "ENOENT" || (e as Error)?.name === "TimeoutError") {
    process.stderr.write(`capstan ${command}: Docker engine: ${err.message}\n`);
    return 1;
  }
  return reportFailure(command, e);
}

/** The platform registry option of release, releases and deploy. */
export const registryOptionDef: OptionDef = {
  name: "registry",
  type: "string",
  help: "the platform registry HOST:PORT (images are <registry>/<app>:<tag>)",
  default: "127.0.0.1:5000",
};
