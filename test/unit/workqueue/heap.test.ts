import { describe, expect, it } from "vitest";
import { IndexedHeap } from "../../../runtime/workqueue/heap.ts";
import { mulberry32 } from "./helpers.ts";

interface Item {
  heapIndex: number;
  v: number;
  id: number;
}

describe("IndexedHeap", () => {
  it("pops in order through random pushes, pops, removals and key changes (seed 11)", () => {
    const rand = mulberry32(11);
    const heap = new IndexedHeap<Item>((a, b) => a.v < b.v || (a.v === b.v && a.id < b.id));
    const live = new Set<Item>();
    let id = 0;
    for (let step = 0; step < 10_000; step++) {
      const r = rand();
      const items = [...live];
      if (r < 0.4) {
        const it: Item = { heapIndex: -1, v: Math.floor(rand() * 100), id: id++ };
        heap.push(it);
        live.add(it);
      } else if (r < 0.6 && items.length > 0) {
        const expected = items.reduce((m, x) => (x.v < m.v || (x.v === m.v && x.id < m.id) ? x : m));
        if (heap.pop() !== expected || expected.heapIndex !== -1) throw new Error(`wrong pop at step ${step}`);
        live.delete(expected);
      } else if (r < 0.8 && items.length > 0) {
        const victim = items[Math.floor(rand() * items.length)]!;
        heap.remove(victim);
        live.delete(victim);
      } else if (items.length > 0) {
        const moved = items[Math.floor(rand() * items.length)]!;
        moved.v = Math.floor(rand() * 100);
        heap.update(moved);
      }
      if (heap.size !== live.size || heap.values().some((x, i) => x.heapIndex !== i)) {
        throw new Error(`heap size or positions wrong after step ${step}`);
      }
    }
    const out: Item[] = [];
    for (let x = heap.pop(); x !== undefined; x = heap.pop()) out.push(x);
    expect(out).toEqual([...live].sort((a, b) => a.v - b.v || a.id - b.id));
  });
});
