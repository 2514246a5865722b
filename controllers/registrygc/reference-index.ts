// The union of all repositories' marks, in memory: how many repositories keep each digest, and
// which repositories link each blob (`_layers`). A digest whose count is zero is garbage unless a
// recent touch protects it (collector.ts). Kept by the collector between runs of one leadership
// term, loaded from the store's marks at the first run of a term.
import { keptDigests, type RepositoryMark } from "./mark.ts";

export class ReferenceIndex {
  private readonly marks = new Map<string, { mark: RepositoryMark; kept: Set<string> }>();
  private readonly counts = new Map<string, number>();
  private readonly linkedIn = new Map<string, Set<string>>();

  get repositories(): number {
    return this.marks.size;
  }

  get size(): number {
    return this.counts.size;
  }

  markOf(repository: string): RepositoryMark | undefined {
    return this.marks.get(repository)?.mark;
  }

  repositoryNames(): string[] {
    return [...this.marks.keys()];
  }

  isKept(digest: string): boolean {
    return (this.counts.get(digest) ?? 0) > 0;
  }

  /** Repositories whose `_layers` link `digest`, as their marks last saw. */
  linkingRepositories(digest: string): string[] {
    return [...(this.linkedIn.get(digest) ?? [])];
  }

  /** Replace `repository`'s mark (undefined: the repository is gone); answers the digests no repository keeps any more. */
  set(repository: string, mark: RepositoryMark | undefined): string[] {
    const before = this.marks.get(repository);
    const kept = mark === undefined ? new Set<string>() : keptDigests(mark);
    const dropped: string[] = [];
    for (const d of kept) if (!before?.kept.has(d)) this.counts.set(d, (this.counts.get(d) ?? 0) + 1);
    if (before !== undefined) {
      for (const d of before.kept) {
        if (kept.has(d)) continue;
        const n = (this.counts.get(d) ?? 1) - 1;
        if (n > 0) this.counts.set(d, n);
        else {
          this.counts.delete(d);
          dropped.push(d);
        }
      }
      for (const d of before.mark.layers) {
        const s = this.linkedIn.get(d);
        s?.delete(repository);
        if (s?.size === 0) this.linkedIn.delete(d);
      }
    }
    for (const d of mark?.layers ?? []) {
      let s = this.linkedIn.get(d);
      if (s === undefined) this.linkedIn.set(d, (s = new Set()));
      s.add(repository);
    }
    if (mark === undefined) this.marks.delete(repository);
    else this.marks.set(repository, { mark, kept });
    return dropped;
  }
}
