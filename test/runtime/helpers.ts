import type { Behavior, Message, SnapshotCodec } from '../../src/runtime/actor.js';
import { FakeClock } from '../../src/runtime/clock.js';
import type { ActorDutyEnded, ActorErrorInfo } from '../../src/runtime/host.js';
import { LocalPlacement, type Placement, type Transport } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { MemorySnapshotStore } from './memory-snapshots.js';

/** A promise with its resolvers outside: a gate a test opens when it chooses. */
export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued microtask run (several rounds, for chains of awaits). */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}

export interface TestSystem {
  system: ActorSystem;
  clock: FakeClock;
  snapshots: MemorySnapshotStore;
  /** Everything the `onError` hook received. */
  errors: { error: unknown; info: ActorErrorInfo }[];
  /** Everything the `onDutyEnded` hook received. */
  dutiesEnded: ActorDutyEnded[];
}

export interface TestSystemOptions {
  nodeId?: string;
  clock?: FakeClock;
  snapshots?: MemorySnapshotStore;
  placement?: Placement;
  transport?: Transport;
  defaultAskTimeoutMs?: number;
  behaviors?: Behavior<never, never>[];
}

/** An `ActorSystem` on a fake clock and an in-memory snapshot store, recording its errors. */
export function testSystem(options: TestSystemOptions = {}): TestSystem {
  const nodeId = options.nodeId ?? 'node-a';
  const clock = options.clock ?? new FakeClock();
  const snapshots = options.snapshots ?? new MemorySnapshotStore();
  const errors: TestSystem['errors'] = [];
  const dutiesEnded: ActorDutyEnded[] = [];
  const system = new ActorSystem({
    nodeId,
    clock,
    snapshots,
    placement: options.placement ?? new LocalPlacement(nodeId),
    transport: options.transport,
    defaultAskTimeoutMs: options.defaultAskTimeoutMs,
    onError: (error, info) => errors.push({ error, info }),
    onDutyEnded: (ended) => dutiesEnded.push(ended),
  });
  return { system, clock, snapshots, errors, dutiesEnded };
}

/** Registers a behavior given as a literal, keeping its types. */
export function behavior<S, M extends Message, Snap = never>(definition: Behavior<S, M, Snap>): Behavior<S, M, Snap> {
  return definition;
}

/** A snapshot codec (version 1) for test kinds that takes what it reads as it is. */
export function trusted<T>(): SnapshotCodec<T> {
  return { version: 1, decode: (raw) => raw as T };
}
