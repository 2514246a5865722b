// `capstan registry gc-policy set|list|get|delete`: the registry's garbage-collection policies
// (docs/registry-gc.md), records in the store the registry runs on. The command talks to
// the store directly, as the registry does, so it needs the same -store (and -store-* options for
// etcd TLS and users); there is no default, because a guessed store (an embedded SQLite file that
// happens to be in the working directory) would take policies no registry ever reads. An sqlite://
// store must already exist (the registry creates it at its first start) for the same reason.
//
//   set FILE.json|-   validate and store one policy (exit 2 with every problem, by field, when invalid)
//   list [-json]      every policy; stored records that do not parse are named on stderr
//   get NAME          the policy as JSON (what set takes)
//   delete NAME       remove it (exit 1 when there is none)
//
// Command-line mistakes are UsageErrors (exit 2 from main, as for every command).
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { CompactedError, StoreUnavailableError } from "../../adapters/store/errors.ts";
import { openStore, StoreUrlError } from "../../adapters/store/open.ts";
import type { Store } from "../../adapters/store/store.ts";
import {
  deletePolicy,
  getPolicy,
  graceSecondsOf,
  isPolicyName,
  listPolicies,
  parsePolicy,
  putPolicy,
  untaggedGraceSecondsOf,
  type GcPolicy,
} from "../../controllers/registrygc/policy.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { table } from "../render.ts";
import { storeConnectionFromOptions, storeConnectionOptionDefs } from "../store-options.ts";

const storeDefs: OptionDef[] = [
  {
    name: "store",
    type: "string",
    help:
      "the registry's store URL, required: its -store (sqlite://PATH, etcd://HOST:PORT, etcds://...); a registry without -store " +
      "keeps it in sqlite://ROOTDIRECTORY/capstan/state.db, capstan up in sqlite://DATA/state.db",
  },
  ...storeConnectionOptionDefs,
];

type Verb = "set" | "list" | "get" | "delete";

const verbs: Record<Verb, { defs: OptionDef[]; args: string; summary: string }> = {
  set: {
    defs: storeDefs,
    args: "FILE.json|-",
    summary: "Validates a GC policy (JSON; - reads standard input) and stores it, replacing the policy of that name.\nExit code 2 when it is not valid, with every problem by field.",
  },
  list: {
    defs: [{ name: "json", type: "bool", help: "print the policies as a JSON array" }, ...storeDefs],
    args: "",
    summary: "Lists the GC policies. Stored records that are not valid policies are named on standard error\n(the collector ignores them).",
  },
  get: { defs: storeDefs, args: "NAME", summary: "Prints a GC policy as JSON, as set takes it." },
  delete: { defs: storeDefs, args: "NAME", summary: "Deletes a GC policy. Exit code 1 when there is none of that name." },
};

const overview = `usage: capstan registry gc-policy set|list|get|delete ... -store URL

Manages the registry's garbage-collection policies, kept in its store (-store, as the registry's).

  capstan registry gc-policy set FILE.json|-   validate and store a policy
  capstan registry gc-policy list [-json]      list them
  capstan registry gc-policy get NAME          print one as JSON
  capstan registry gc-policy delete NAME       delete one

capstan registry gc-policy VERB -h shows a verb's options.
example:
  capstan registry gc-policy set shop.json -store sqlite:///var/lib/registry/capstan/state.db
`;

/** `argv` is what follows `capstan registry gc-policy`; `stdin` is read for `set -`. */
export async function gcPolicyCommand(argv: string[], stdin: NodeJS.ReadableStream = process.stdin): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "-help" || verb === "--help" || verb === "help") {
    process.stdout.write(overview);
    return verb === undefined ? 2 : 0;
  }
  if (!isVerb(verb)) throw new UsageError(`gc-policy: unknown sub-command "${verb}": use set, list, get or delete`);
  const { defs, args: argText, summary } = verbs[verb];
  const args = parseArgs(rest, defs);
  if (args.help) {
    process.stdout.write(usage(`registry gc-policy ${verb}`, summary, defs, argText));
    return 0;
  }
  const wanted = argText === "" ? 0 : 1;
  if (args.positionals.length > wanted) throw new UsageError(`gc-policy ${verb}: unexpected argument "${args.positionals[wanted]}"`);
  const operand = args.positionals[0];
  if (wanted === 1 && operand === undefined) {
    throw new UsageError(`gc-policy ${verb}: ${argText} is required, e.g. capstan registry gc-policy ${verb} ${verb === "set" ? "shop.json" : "shop"} -store URL`);
  }
  if ((verb === "get" || verb === "delete") && !isPolicyName(operand!)) {
    throw new UsageError(`gc-policy ${verb}: NAME ${JSON.stringify(operand)} is no policy name (a-z, 0-9 and -, 1-63 characters)`);
  }

  const store = openRegistryStore(args.options);
  try {
    // The file is read and validated before anything is written: an invalid policy leaves no trace.
    let policy: GcPolicy | undefined;
    if (verb === "set") {
      const read = await readPolicyFile(operand!, stdin);
      if (!read.ok) {
        const where = operand === "-" ? "standard input" : operand;
        process.stderr.write(`capstan registry gc-policy set: ${where} is not a valid GC policy:\n${read.problems.map((p) => `  ${p}\n`).join("")}`);
        return 2;
      }
      policy = read.policy;
    }
    switch (verb) {
      case "set": {
        const outcome = await putPolicy(store, policy!);
        process.stdout.write(`gc-policy ${policy!.name} ${outcome}\n`);
        return 0;
      }
      case "list": {
        const { policies, invalid } = await listPolicies(store);
        for (const bad of invalid) {
          process.stderr.write(`capstan registry gc-policy list: stored policy ${bad.name} is not valid and is ignored: ${bad.problems.join("; ")}\n`);
        }
        process.stdout.write(args.options.json ? `${JSON.stringify(policies, null, 2)}\n` : renderPolicies(policies));
        return 0;
      }
      case "get": {
        const found = await getPolicy(store, operand!);
        if (found === null) return failed(verb, `no GC policy ${operand}`);
        if (!found.ok) return failed(verb, `stored policy ${operand} is not valid (the collector ignores it): ${found.problems.join("; ")}`);
        process.stdout.write(`${JSON.stringify(found.policy, null, 2)}\n`);
        return 0;
      }
      case "delete": {
        if (!(await deletePolicy(store, operand!))) return failed(verb, `no GC policy ${operand}`);
        process.stdout.write(`gc-policy ${operand} deleted\n`);
        return 0;
      }
    }
  } catch (e) {
    // The store's own errors (unreachable, locked for too long) say what happened; anything else is a bug.
    if (e instanceof StoreUnavailableError || e instanceof CompactedError) return failed(verb, `the store ${store.description}: ${e.message}`);
    throw e;
  } finally {
    await store.close();
  }
}

function isVerb(verb: string): verb is Verb {
  return Object.hasOwn(verbs, verb);
}

function failed(verb: Verb, message: string): number {
  process.stderr.write(`capstan registry gc-policy ${verb}: ${message}\n`);
  return 1;
}

/** The policy in `file` ("-" = standard input): JSON, then parsePolicy; problems name the fields. */
async function readPolicyFile(file: string, stdin: NodeJS.ReadableStream): Promise<{ ok: true; policy: GcPolicy } | { ok: false; problems: string[] }> {
  let text: string;
  try {
    text = file === "-" ? await readAll(stdin) : await readFile(file, "utf8");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return { ok: false, problems: [`cannot read it (${err.code ?? err.message})`] };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { ok: false, problems: [`not JSON: ${(e as Error).message}`] };
  }
  return parsePolicy(json);
}

/** The store of -store; a UsageError when it is missing, malformed, or an sqlite:// file that does not exist. */
function openRegistryStore(options: Record<string, string | number | boolean | undefined>): Store {
  const url = typeof options.store === "string" ? options.store.trim() : "";
  if (url === "") {
    throw new UsageError(
      "-store URL is required: the registry's store (its -store; a registry without -store keeps it in " +
        "sqlite://ROOTDIRECTORY/capstan/state.db, capstan up in sqlite://DATA/state.db)",
    );
  }
  const sqlite = /^sqlite:\/\/(.*)$/i.exec(url);
  if (sqlite !== null && sqlite[1] !== ":memory:" && sqlite[1] !== "" && !existsSync(resolve(sqlite[1]!))) {
    throw new UsageError(`-store ${url}: there is no store at ${resolve(sqlite[1]!)} (the registry creates it when it first starts; check the path)`);
  }
  const connection = storeConnectionFromOptions(options);
  try {
    return openStore(url, connection);
  } catch (e) {
    if (e instanceof StoreUrlError) throw new UsageError(`-store: ${e.message}`);
    throw e;
  }
}

/** NAME REPOSITORIES KEEP NEWEST KEEP DAYS UNTAGGED GRACE INTERVAL, one row per policy. */
export function renderPolicies(policies: readonly GcPolicy[]): string {
  if (policies.length === 0) return "no GC policies\n";
  const rows = policies.map((p) => [
    p.name,
    p.repositories,
    p.keepNewest === undefined ? "-" : `${p.keepNewest.count} of each of ${p.keepNewest.groups.join(" ")}`,
    p.keepNewerThanDays === undefined ? "-" : `${p.keepNewerThanDays}d`,
    p.deleteUntagged ? `after ${seconds(untaggedGraceSecondsOf(p))}` : "-",
    seconds(graceSecondsOf(p)),
    p.intervalSeconds === undefined ? "on request" : `every ${seconds(p.intervalSeconds)}`,
  ]);
  return table(["NAME", "REPOSITORIES", "KEEP NEWEST", "NEWER THAN", "DELETE UNTAGGED", "BLOB GRACE", "RUNS"], rows);
}

/** 7d, 36h, 90m, 45s: the largest unit that divides the seconds. */
function seconds(s: number): string {
  for (const [unit, size] of [["d", 86_400], ["h", 3_600], ["m", 60]] as const) if (s > 0 && s % size === 0) return `${s / size}${unit}`;
  return `${s}s`;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}
