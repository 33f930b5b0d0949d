/**
 * Merges single writes into batches: items submitted during one event-loop turn (and while
 * earlier batches are in flight, beyond `maxInFlight` of them) go to the store together, up
 * to `maxBatch` per call. 100 000 cron actors firing at the top of a minute become ~100
 * statements, not 100 000.
 */
export class WriteBatcher<I, O> {
  private queue: { item: I; resolve: (value: O) => void; reject: (error: unknown) => void }[] = [];
  private scheduled = false;
  private inFlight = 0;

  constructor(
    /** Writes a batch; answers one result per item, in order. */
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 1_000,
    private readonly maxInFlight = 2,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      this.run(batch.map((b) => b.item))
        .then(
          (results) => batch.forEach((b, i) => b.resolve(results[i] as O)),
          (error: unknown) => batch.forEach((b) => b.reject(error)),
        )
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }
}
