/**
 * Where an actor lives. On one node every actor is here; the cluster plugs a consistent-hash
 * ring in behind the same interface without touching the actors.
 */
export interface Placement {
  /** The node id that owns `(kind, key)` now. */
  ownerOf(kind: string, key: string): string;
}

/** One node: every actor is local. */
export class LocalPlacement implements Placement {
  constructor(private readonly nodeId: string) {}

  ownerOf(): string {
    return this.nodeId;
  }
}

/** Carries messages to actors owned by another node. */
export interface Transport {
  deliver(
    nodeId: string,
    envelope: { kind: string; key: string; message: unknown; deadlineMs: number; ask: boolean },
  ): Promise<unknown>;
}
