// `capstan apps maintainers add|remove`: the e-mails asked for, and what to say of the console's
// answer. The console works out the new list itself (PATCH, docs/console.md), so two edits at once
// both land; it stores e-mails trimmed and in lower case, so they are compared so.

const norm = (e: string) => e.trim().toLowerCase();

/** E-mails from the command line: each argument may hold several, comma-separated. */
export function emailArgs(args: string[]): string[] {
  return [...new Set(args.flatMap((a) => a.split(",")).map(norm).filter((e) => e !== ""))];
}

/** The line for an edit: who was added or removed, and which of the asked-for changed nothing. */
export function editNote(app: string, verb: "add" | "remove", asked: string[], done: { added: string[]; removed: string[] }): string {
  const changed = verb === "add" ? done.added : done.removed;
  const same = asked.filter((e) => !changed.includes(e));
  const plural = same.length > 1;
  const state = verb === "add" ? (plural ? "were already maintainers" : "was already maintainer") : plural ? "were not maintainers" : "was not a maintainer";
  const note = [changed.length > 0 ? `${verb === "add" ? "added" : "removed"} ${changed.join(", ")}` : "", same.length > 0 ? `${same.join(", ")} ${state}` : ""]
    .filter((s) => s !== "")
    .join("; ");
  return changed.length > 0 ? `app ${app}: ${note}` : `app ${app}: nothing changed (${note})`;
}
