/**
 * Named statements prepared afresh each time the task table has doubled (or halved) in size.
 *
 * A named statement's plan is settled on one connection after five runs: Postgres then keeps a
 * generic plan, costed with the table as it was at that moment, until something invalidates it
 * (an ANALYZE or VACUUM of the table, DDL). Made on a nearly empty table — a fresh install, a
 * table retention emptied overnight, a fresh benchmark schema — that plan reads the table in
 * full: `Seq Scan on tasks` for a claim, a completion or a release of one task. Once the table
 * has grown it stays so until the next ANALYZE, which autovacuum runs at most once a minute and
 * a server without autovacuum never: at the top of the hour, the spike would run on plans made
 * for an empty table. Measured in W5's chain of fans (14 000 tasks, no ANALYZE on this
 * machine): claims, completions and releases of 1–99 tasks took 4–17 ms each; with names by
 * size class the edge overhead p50 went 16–20 → 9–10 ms and the chain's end to end 6.7–8.0 →
 * 4.5–4.9 s (issue 31, decision 0055).
 *
 * The statement's name carries the table's size class (`log2` of its pages), read at most every
 * `everyMs`: when the class changes, every connection prepares the statement under the new
 * name, and the plan it settles on is costed with the table's current size. The text is the
 * same; a class is at most a doubling, and there are at most 15 (see {@link MAX_SIZE_CLASS}).
 */
export class PlanGenerations {
  private suffix = '';
  private checkedMs = Number.NEGATIVE_INFINITY;
  private checking = false;

  constructor(
    /** The task table's size in pages (8 KiB); rejects when it cannot be read (before the migrations). */
    private readonly readPages: () => Promise<number>,
    private readonly everyMs = 5_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** `name` for the table's current size class; starts a read of the size when the last is older than `everyMs`. */
  name(name: string): string {
    const now = this.now();
    if (!this.checking && now - this.checkedMs >= this.everyMs) {
      this.checkedMs = now;
      this.checking = true;
      this.readPages()
        .then((pages) => {
          const size = sizeClass(pages);
          this.suffix = size === 0 ? '' : `.g${size}`;
        })
        .catch(() => undefined)
        .finally(() => {
          this.checking = false;
        });
    }
    return this.suffix === '' ? name : name + this.suffix;
  }
}

/**
 * Past this class (16 384 pages, 128 MiB) the names stop changing. A plan made on a table that
 * large already finds rows by their keys, as it would on a larger one; what goes wrong is a
 * plan made on a small table. Each class leaves its statements prepared on every connection
 * that ran them, so the classes are bounded too: at most 15 sets of plans a connection.
 */
export const MAX_SIZE_CLASS = 14;

/** 0 for a table of at most one page, else the number of doublings to reach `pages`, at most {@link MAX_SIZE_CLASS}. */
export function sizeClass(pages: number): number {
  return pages <= 1 ? 0 : Math.min(MAX_SIZE_CLASS, Math.ceil(Math.log2(pages)));
}
