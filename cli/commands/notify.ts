// `capstan notify set|list|delete|route|routes`: notify channels (docs/notify.md).
//
//   set KIND -webhook URL|-   admin: deliver events routed to KIND by POSTing to URL (- reads it from standard input)
//   list [-o json]            admin: the channel kinds, webhooks redacted
//   delete KIND               admin: remove a channel kind (exit 1 when there is none)
//   route -f app.yaml         the definition's notify map becomes its app's routes (maintainers, admins)
//   routes APP                the app's routes
//
// The webhook is a secret: it is sent in the request body, and never printed (set prints it
// redacted, as the server answers it).
import { readFile } from "node:fs/promises";
import { parseAppDefinition } from "../../api/appdef/index.ts";
import { channelKindPattern, isHttpUrl, type NotifyChannelView } from "../../api/resources/notify.ts";
import { clientOptionDefs, targetFromOptions } from "../client-config.ts";
import { CommandFailure, reportFailure } from "../failure.ts";
import { HttpClient } from "../http-client.ts";
import { ApiError } from "../http-errors.ts";
import { syncNotifyRoutes, type RoutesAnswer } from "../notify-routes.ts";
import { parseArgs, usage, UsageError, type OptionDef } from "../options.ts";
import { jsonAliasDef, outputFormat, outputOptionDef } from "../output-option.ts";
import { table } from "../render.ts";
import { readSecretInput } from "../stdin.ts";

type Verb = "set" | "list" | "delete" | "route" | "routes";

const verbs: Record<Verb, { defs: OptionDef[]; args: string; summary: string }> = {
  set: {
    defs: [{ name: "webhook", type: "string", help: "the webhook URL events are POSTed to (- reads it from standard input, keeping it out of the shell history)" }, ...clientOptionDefs],
    args: "KIND",
    summary: "Admin: events routed to channel kind KIND (notify.KIND in app.yaml) are POSTed to the webhook.",
  },
  list: { defs: [outputOptionDef(["table", "json"], "the server's records"), jsonAliasDef, ...clientOptionDefs], args: "", summary: "Admin: the channel kinds, webhooks redacted." },
  delete: { defs: clientOptionDefs, args: "KIND", summary: "Admin: remove channel kind KIND (events routed to it are no longer sent). Exit code 1 when there is none." },
  route: {
    defs: [{ name: "file", short: "f", type: "string", help: "the application definition (YAML)", default: "app.yaml" }, ...clientOptionDefs],
    args: "",
    summary: "Store the definition's notify map as its app's routes (maintainers of the app, admins); no notify key removes them.",
  },
  routes: { defs: [outputOptionDef(["table", "json"], "the server's record"), jsonAliasDef, ...clientOptionDefs], args: "APP", summary: "The app's routes: channel kind and target." },
};

const help = `usage: capstan notify set|list|delete|route|routes ... (capstan notify VERB -h for its options)

Notify channels (docs/notify.md): an app's events go to the channels its definition names
(notify.<kind>: "<target>"); an admin maps each kind to a webhook.

examples:
  capstan notify set slack -webhook https://hooks.slack.com/services/T0/B0/XXXX
  capstan notify list
  capstan notify route -f app.yaml
  capstan notify routes shop
  capstan notify delete slack
`;

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === "-h" || verb === "--help" || verb === "help") {
    process.stdout.write(help);
    return verb === undefined ? 2 : 0;
  }
  if (!(verb in verbs)) throw new UsageError(`unknown verb "${verb}": set, list, delete, route or routes`);
  const v = verbs[verb as Verb];
  const args = parseArgs(rest, v.defs);
  if (args.help) {
    process.stdout.write(usage(`notify ${verb}`, v.summary, v.defs, v.args));
    return 0;
  }
  const wanted = v.args === "" ? 0 : 1;
  if (args.positionals.length !== wanted) throw new UsageError(wanted === 0 ? `unexpected argument "${args.positionals[0]}"` : `needs ${v.args}`);
  const o = args.options;
  const arg = args.positionals[0];
  if ((verb === "set" || verb === "delete") && !channelKindPattern.test(arg!)) throw new UsageError(`KIND: "${arg}" must be a lower-case word: a-z first, then a-z, 0-9, _ or -, at most 32 characters`);
  let webhook: string | undefined;
  if (verb === "set") {
    webhook = o.webhook as string | undefined;
    if (webhook === undefined || webhook === "") throw new UsageError("-webhook URL is required (- reads it from standard input)");
    if (webhook === "-") webhook = await readSecretInput("webhook URL: ");
    // Not echoed: a mistyped secret is still a secret.
    if (!isHttpUrl(webhook)) throw new UsageError("-webhook: must be an http:// or https:// URL with a host");
  }
  try {
    const target = targetFromOptions(o);
    const http = new HttpClient({ server: target.server, component: "orchestrator", requestTimeoutMs: o["request-timeout"] as number, token: target.token, ca: target.ca });
    switch (verb as Verb) {
      case "set": {
        const view = (await http.request("PUT", `/api/notify/channels/${arg}`, { webhook })) as NotifyChannelView;
        process.stdout.write(`notify channel ${view.kind} set: ${view.webhook}\n`);
        return 0;
      }
      case "list": {
        const list = (await http.request("GET", "/api/notify/channels")) as NotifyChannelView[];
        if (outputFormat(o, ["table", "json"]) === "json") process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        else process.stdout.write(table(["KIND", "WEBHOOK", "UPDATED", "BY"], list.map((c) => [c.kind, c.webhook, c.updatedAt, c.updatedBy])));
        return 0;
      }
      case "delete": {
        try {
          await http.request("DELETE", `/api/notify/channels/${arg}`);
        } catch (e) {
          if (e instanceof ApiError && e.status === 404) throw new CommandFailure(`no notify channel ${arg}`);
          throw e;
        }
        process.stdout.write(`notify channel ${arg} deleted\n`);
        return 0;
      }
      case "route": {
        const file = o.file as string;
        let text: string;
        try {
          text = await readFile(file, "utf8");
        } catch (e) {
          throw new CommandFailure(`-f ${file}: ${(e as Error).message}`);
        }
        const { definition } = parseAppDefinition(text, file);
        const result = await syncNotifyRoutes(http, definition);
        const routes = Object.entries(definition.notify).map(([k, t]) => `${k} ${t}`).join(", ");
        process.stdout.write(`notify routes of ${definition.appname} ${result}${routes === "" ? "" : `: ${routes}`}\n`);
        return 0;
      }
      case "routes": {
        const answer = (await http.request("GET", `/api/notify/routes/${encodeURIComponent(arg!)}`)) as RoutesAnswer;
        if (outputFormat(o, ["table", "json"]) === "json") process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
        else process.stdout.write(table(["KIND", "TARGET"], Object.entries(answer.routes ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))));
        return 0;
      }
    }
  } catch (e) {
    return reportFailure(`notify ${verb}`, e);
  }
}
