/**
 * Wait for every promise, then rethrow the first failure. Unlike Promise.all, nothing is left
 * running behind the caller when one fails: a pass never ends while its engine calls go on.
 */
export async function settleAll(ps: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(ps);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}
