// An edit of an app's maintainers (PATCH /api/v1/apps/<app>/maintainers, docs/console.md): who is
// added and who removed, worked out from the list as stored, inside the write's compare-and-swap,
// so that two edits at once both land (a read by the client, then a PUT of the whole list, would
// lose one). E-mails arrive normalized (records.ts: trimmed, lower case).

/** The most maintainers an app has (records.ts's Maintainers: POST and PUT check it too). */
export const maxMaintainers = 100;

/** What an edit did: the new list, and who of the asked-for were actually added or removed. */
export interface MaintainersEdited {
  maintainers: string[];
  added: string[];
  removed: string[];
}

/**
 * `current` with `add` appended (those not there yet, in order) and `remove` taken out; an error
 * when the edit would leave no maintainer (an app keeps at least one).
 */
export function editMaintainers(current: string[], edit: { add: string[]; remove: string[] }): MaintainersEdited | { error: string; field: "add" | "remove" } {
  // A record written by hand may hold another spelling: compared as the API stores them.
  const norm = (e: string) => e.trim().toLowerCase();
  const drop = new Set(edit.remove);
  const kept = current.filter((e) => !drop.has(norm(e)));
  const removed = current.filter((e) => drop.has(norm(e)));
  const have = new Set(current.map(norm));
  const added = [...new Set(edit.add)].filter((e) => !have.has(e));
  const maintainers = [...kept, ...added];
  if (maintainers.length === 0) return { field: "remove", error: `would have no maintainer left (it has ${current.join(", ")}): add the new one first` };
  if (maintainers.length > maxMaintainers) return { field: "add", error: `would have ${maintainers.length} maintainers, more than ${maxMaintainers}` };
  return { maintainers, added, removed };
}
