// The NAME[/INSTANCE] argument of the commands that address one container or a whole group
// (`capstan logs`, `capstan exec`; docs/cli.md).
import { firstInstanceNo, instanceNumbersFrom } from "../api/resources/podgroup.ts";
import { UsageError } from "./options.ts";

/** NAME or NAME/INSTANCE; a usage error names the argument otherwise. */
export function instanceTarget(arg: string): { name: string; instance?: number } {
  const slash = arg.indexOf("/");
  if (slash < 0) return { name: arg };
  const name = arg.slice(0, slash);
  const instance = arg.slice(slash + 1);
  if (name === "" || !/^\d{1,9}$/.test(instance)) throw new UsageError(`"${arg}" is not NAME or NAME/INSTANCE (an instance number, e.g. hello/1)`);
  if (Number(instance) < firstInstanceNo) throw new UsageError(`"${arg}": ${instanceNumbersFrom} (e.g. ${name}/1)`);
  return { name, instance: Number(instance) };
}
