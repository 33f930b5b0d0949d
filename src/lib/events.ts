/**
 * A typed, synchronous event bus: `emit(name, payload)` calls each listener of `name` in turn.
 * A listener that throws is reported to `onListenerError` and does not stop the others or the
 * emitter — an observer (a metric, a test waiting on an event) never breaks the path it
 * observes.
 */
/** Event names to payload types. */
export type EventMap = object;

/** The side that emits: what services and actors are given. */
export interface EventSink<E extends EventMap> {
  emit<K extends keyof E & string>(name: K, payload: E[K]): void;
}

export class TypedEvents<E extends EventMap> implements EventSink<E> {
  private readonly listeners = new Map<keyof E, Set<(payload: never) => void>>();

  constructor(private readonly onListenerError: (error: unknown, name: string) => void = () => undefined) {}

  /** Adds a listener; returns the function that removes it. */
  on<K extends keyof E & string>(name: K, listener: (payload: E[K]) => void): () => void {
    let set = this.listeners.get(name);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<K extends keyof E & string>(name: K, payload: E[K]): void {
    const set = this.listeners.get(name);
    if (set === undefined || set.size === 0) return;
    for (const listener of [...set]) {
      try {
        (listener as (payload: E[K]) => void)(payload);
      } catch (error) {
        this.onListenerError(error, name);
      }
    }
  }

  /** How many listeners `name` has (tests check that waits clean up after themselves). */
  listenerCount(name: keyof E & string): number {
    return this.listeners.get(name)?.size ?? 0;
  }
}

/** An emitter that drops everything: for components built without a node (unit tests). */
export const NO_EVENTS: EventSink<never> = { emit: () => undefined };
