/** A ready-queue push listener: told which task types just got entries. */
export type PushListener = (taskTypes: Set<string>) => void;

/**
 * The listeners of a ready queue's `onPush`. Listeners are wake-up hooks and should not
 * throw; if one does, the others still run and the error is rethrown to the pusher (a
 * push is idempotent, so retrying it is safe).
 */
export class PushListeners {
  private readonly listeners = new Set<PushListener>();

  add(listener: PushListener): () => void {
    // A wrapper, so that adding the same function twice gives two independent subscriptions.
    const entry: PushListener = (types) => listener(types);
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  emit(taskTypes: Set<string>): void {
    if (taskTypes.size === 0 || this.listeners.size === 0) return;
    const errors: unknown[] = [];
    for (const listener of [...this.listeners]) {
      try {
        listener(taskTypes);
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, 'Ready-queue push listeners failed.');
  }
}
