import type { Db, DbResult, DbTx } from './db.js';

/**
 * A priority lane over a shared pool: a view of the database for the few short statements
 * whose latency someone waits on — a limit key's activation (its ownership statement and the
 * read of its live tasks) and a one-task submit — which otherwise queue behind a flood's
 * batches and the safety net's passes in the shared pool (W6: 60–200 ms each under a flood).
 *
 * A lane statement runs on a reserved connection while one of them is free, and otherwise
 * takes its turn in the shared pool like any other. Nothing else ever runs on the reserved
 * connections, so the lane adds capacity and takes none: a statement outside the lane waits
 * no longer than without it, and a lane statement no longer than without it either (a burst
 * of them spills into the shared queue rather than queueing behind the reserved ones).
 * docs/decisions/0028-priority-lane.md.
 */
export class PriorityLane implements Db {
  private busy = 0;

  constructor(
    /** The pool every other statement uses. */
    private readonly shared: Db,
    /** The lane's own connections, used by nothing else. */
    private readonly reserved: Db,
    /** How many connections `reserved` holds. */
    private readonly size: number,
  ) {}

  get driver(): Db['driver'] {
    return this.shared.driver;
  }

  get schema(): string {
    return this.shared.schema;
  }

  /** How many lane statements hold a reserved connection now. */
  get inUse(): number {
    return this.busy;
  }

  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[], name?: string): Promise<DbResult<R>> {
    return this.route((db) => db.query<R>(text, params, name));
  }

  exec(script: string): Promise<void> {
    return this.route((db) => db.exec(script));
  }

  transaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T> {
    return this.route((db) => db.transaction(fn));
  }

  /** The pools are their opener's to close. */
  async close(): Promise<void> {}

  /** On a reserved connection if one is free (counted here, synchronously), else the shared pool. */
  private route<T>(run: (db: Db) => Promise<T>): Promise<T> {
    if (this.busy >= this.size) return run(this.shared);
    this.busy++;
    let running: Promise<T>;
    try {
      running = run(this.reserved);
    } catch (error) {
      this.busy--;
      throw error;
    }
    return running.finally(() => {
      this.busy--;
    });
  }
}
