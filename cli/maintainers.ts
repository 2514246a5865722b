// `capstan apps maintainers add|remove`: the new maintainer list of an app, worked out from the one
// the console holds. The console stores e-mails trimmed and in lower case, so they are compared so.

export type MaintainerEdit =
  | { changed: false; maintainers: string[]; note: string }
  | { changed: true; maintainers: string[]; note: string }
  | { error: string };

const norm = (e: string) => e.trim().toLowerCase();

/** E-mails from the command line: each argument may hold several, comma-separated. */
export function emailArgs(args: string[]): string[] {
  return [...new Set(args.flatMap((a) => a.split(",")).map(norm).filter((e) => e !== ""))];
}

/** `current` with `emails` added: the ones already there are said, not repeated. */
export function addMaintainers(app: string, current: string[], emails: string[]): MaintainerEdit {
  const have = new Set(current.map(norm));
  const fresh = emails.filter((e) => !have.has(e));
  const already = emails.filter((e) => have.has(e));
  const note = [
    fresh.length > 0 ? `added ${fresh.join(", ")}` : "",
    already.length > 0 ? `${already.join(", ")} ${already.length > 1 ? "were" : "was"} already maintainer${already.length > 1 ? "s" : ""}` : "",
  ]
    .filter((s) => s !== "")
    .join("; ");
  if (fresh.length === 0) return { changed: false, maintainers: current, note: `app ${app}: nothing changed (${note})` };
  return { changed: true, maintainers: [...current, ...fresh], note: `app ${app}: ${note}` };
}

/** `current` without `emails`; an app keeps at least one maintainer (the console refuses none). */
export function removeMaintainers(app: string, current: string[], emails: string[]): MaintainerEdit {
  const drop = new Set(emails);
  const left = current.filter((e) => !drop.has(norm(e)));
  const removed = current.filter((e) => drop.has(norm(e))).map(norm);
  const absent = emails.filter((e) => !removed.includes(e));
  if (left.length === 0) {
    return { error: `app ${app} would have no maintainer left (it has ${current.join(", ")}); add the new one first (capstan apps maintainers add)` };
  }
  const note = [
    removed.length > 0 ? `removed ${removed.join(", ")}` : "",
    absent.length > 0 ? `${absent.join(", ")} ${absent.length > 1 ? "were" : "was"} not a maintainer` : "",
  ]
    .filter((s) => s !== "")
    .join("; ");
  if (removed.length === 0) return { changed: false, maintainers: current, note: `app ${app}: nothing changed (${note})` };
  return { changed: true, maintainers: left, note: `app ${app}: ${note}` };
}
