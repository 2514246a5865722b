// Every key under a prefix, read page by page at one revision: the first page fixes the revision
// (or the caller does), so the pages together are one consistent snapshot however many there are,
// and no single response has to hold the whole prefix.
import type { KeyValue, Store } from "./store.ts";

const pageSize = 1000;

export async function listAll(store: Store, prefix: string, revision?: number): Promise<{ items: KeyValue[]; revision: number | undefined }> {
  const items: KeyValue[] = [];
  let startAfter: string | undefined;
  let at = revision;
  for (;;) {
    const page = await store.list(prefix, { limit: pageSize, ...(at !== undefined && { revision: at }), ...(startAfter !== undefined && { startAfter }) });
    at ??= page.revision;
    items.push(...page.items);
    const last = page.items.at(-1);
    if (!page.more || last === undefined) break;
    startAfter = last.key;
  }
  return { items, revision: at };
}
