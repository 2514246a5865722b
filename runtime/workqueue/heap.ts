// A binary heap whose items know their own position, so that an item can be re-sifted after its
// sort key changes or removed from the middle in O(log n). The work queue keeps two: ready keys by
// score and waiting keys by due time.

export interface HeapItem {
  /** Position in the heap's array while in a heap, -1 otherwise. Owned by the heap. */
  heapIndex: number;
}

export class IndexedHeap<T extends HeapItem> {
  private readonly items: T[] = [];

  /** `before(a, b)`: a must come out before b. Must be a strict order (ties broken by the caller). */
  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    item.heapIndex = this.items.length;
    this.items.push(item);
    this.up(item.heapIndex);
  }

  pop(): T | undefined {
    const top = this.items[0];
    if (top === undefined) return undefined;
    this.removeAt(0);
    return top;
  }

  /** Remove `item`, which must be in this heap. */
  remove(item: T): void {
    this.removeAt(item.heapIndex);
  }

  /** Restore order after `item`'s sort key moved (in either direction). */
  update(item: T): void {
    const i = item.heapIndex;
    this.up(i);
    if (this.items[i] === item) this.down(i);
  }

  /** The items in heap (not sorted) order. */
  values(): readonly T[] {
    return this.items;
  }

  clear(): void {
    for (const item of this.items) item.heapIndex = -1;
    this.items.length = 0;
  }

  private removeAt(i: number): void {
    const items = this.items;
    const removed = items[i]!;
    const last = items.pop()!;
    removed.heapIndex = -1;
    if (last === removed) return;
    items[i] = last;
    last.heapIndex = i;
    this.up(i);
    if (items[i] === last) this.down(i);
  }

  private up(i: number): void {
    const items = this.items;
    const item = items[i]!;
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = items[parentIndex]!;
      if (!this.before(item, parent)) break;
      items[i] = parent;
      parent.heapIndex = i;
      i = parentIndex;
    }
    items[i] = item;
    item.heapIndex = i;
  }

  private down(i: number): void {
    const items = this.items;
    const n = items.length;
    const item = items[i]!;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      let child = left;
      if (right < n && this.before(items[right]!, items[left]!)) child = right;
      const c = items[child]!;
      if (!this.before(c, item)) break;
      items[i] = c;
      c.heapIndex = i;
      i = child;
    }
    items[i] = item;
    item.heapIndex = i;
  }
}
