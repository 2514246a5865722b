// The previous container of a PodGroup instance (docs/podgroup-controller.md, "The previous
// container"): when a rollout step (a spec update or a rolling restart) replaces an instance's pod,
// the old pod's containers are stopped and renamed to one fixed name per instance and container
// index instead of being removed, so `GET /api/podgroups/logs?previous=true` can still read them.
// They keep their labels (Docker cannot change labels), so the NAME is what marks them: every
// reader that lists containers by the io.capstan.podgroup label must skip these names. Pure.
//
//   <group>.previous-i<instance>[-c<index>]      (-c<index> from the pod's second container on)
//
// The name holds neither version nor drift, so a node can hold at most one per slot (the engine
// refuses a second), and the controller removes any other copy before it keeps a newer one.

const previousPattern = /\.previous-i(\d{1,9})(?:-c(\d{1,3}))?$/;

/** The name an instance's replaced container `index` is kept under. */
export function previousContainerName(group: string, instance: number, index: number): string {
  return `${group}.previous-i${instance}${index > 0 ? `-c${index}` : ""}`;
}

/** Whether a container name is that of a kept previous container (not an instance's pod). */
export function isPreviousContainer(c: { name: string }): boolean {
  return previousPattern.test(c.name);
}

/** The instance and container index of a kept previous container of `group`, from its name; undefined for any other name. */
export function previousSlot(name: string, group: string): { instance: number; index: number } | undefined {
  const m = previousPattern.exec(name);
  if (!m || name.slice(0, m.index) !== group) return undefined;
  return { instance: Number(m[1]), index: m[2] === undefined ? 0 : Number(m[2]) };
}
