// PodGroup passes in flight, by the tasks-informer revision each one started at. The drift-task
// reconciler asks it before deleting a task: a pass that read the task list before the task
// existed may be creating a pod on the task's `from` right now (not cordoned for it), and that
// pod shows up in the container cache only when its create returns. So a task is deleted only
// once every pass that started before the task's revision has finished (its creates are in the
// cache by then, and a pod on `from` keeps the task pending). Passes that start later see the
// task and never place a pod on `from`.
export class PassesInFlight {
  private readonly started = new Map<number, number>();
  private seq = 0;

  /** Record a pass that read the tasks at `revision`; call the returned function when it ends. */
  begin(revision: number): () => void {
    const id = this.seq++;
    this.started.set(id, revision);
    return () => this.started.delete(id);
  }

  /** Whether a pass that started before `revision` (read the tasks below it) is still running. */
  startedBefore(revision: number): boolean {
    for (const r of this.started.values()) if (r < revision) return true;
    return false;
  }
}
