/**
 * The actor runtime: typed actors addressed by `(kind, key)`, one message at a time from a
 * bounded mailbox, single-flight activation, idle passivation, snapshots fenced by epoch.
 * It knows nothing of tasks.
 */
export type {
  ActorContext,
  ActorInfo,
  ActorKind,
  ActorRef,
  ActorSystemApi,
  Ask,
  Behavior,
  DeactivationReason,
  KindName,
  Message,
  ReplyFor,
  ReplyOf,
  SnapshotCodec,
} from './actor.js';
export { defineKind, kindName } from './actor.js';
export { clampDelay, FakeClock, MAX_TIMER_MS, settle, systemClock, type Cancel, type Clock } from './clock.js';
export { LocalPlacement, type Placement, type Transport } from './placement.js';
export {
  unwrapSnapshot,
  wrapSnapshot,
  type AcquiredSnapshot,
  type SnapshotEnvelope,
  type SnapshotRow,
  type SnapshotStore,
} from './snapshots.js';
export type { ActorDutyEnded, ActorErrorInfo, ActorErrorPhase } from './host.js';
export { DEFAULT_MAILBOX_CAPACITY } from './mailbox.js';
export type { TransportEnvelope } from './router.js';
export { ActorSystem, DEFAULT_ASK_TIMEOUT_MS, DEFAULT_LIST_LIMIT, type ActorSystemOptions } from './system.js';
