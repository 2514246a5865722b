// The Lease handle both stores hand out: it only names the lease; the store that granted it does the work.
import type { Lease } from "./store.ts";

export interface LeaseOwner {
  keepAliveOnce(id: string): Promise<number>;
  revokeLease(id: string): Promise<void>;
}

export class StoreLease implements Lease {
  constructor(
    private readonly owner: LeaseOwner,
    readonly id: string,
    readonly ttlSeconds: number,
  ) {}

  keepAliveOnce(): Promise<number> {
    return this.owner.keepAliveOnce(this.id);
  }

  revoke(): Promise<void> {
    return this.owner.revokeLease(this.id);
  }
}
