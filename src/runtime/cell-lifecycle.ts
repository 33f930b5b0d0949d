import { WheelhouseError } from '../lib/errors.js';
import type { DeactivationReason, Message } from './actor.js';
import type { CellHost } from './host.js';
import { tellsIn, type UnhandledMessages } from './mailbox.js';

/** An actor's address, as errors and reports name it. */
interface ActorAddress {
  readonly kind: string;
  readonly key: string;
}

/**
 * The life of one activation. `activating → active → deactivating → deactivated`, or
 * `activating → deactivated` when activation fails. Anything else is a bug.
 */
export type CellPhase = 'activating' | 'active' | 'deactivating' | 'deactivated';

const LEGAL_TRANSITIONS: Readonly<Record<CellPhase, readonly CellPhase[]>> = {
  activating: ['active', 'deactivated'],
  active: ['deactivating'],
  deactivating: ['deactivated'],
  deactivated: [],
};

/** `next`, if the cell of `address` may go there from `phase`; throws `internal` otherwise. */
export function checkedTransition(address: string, phase: CellPhase, next: CellPhase): CellPhase {
  if (!LEGAL_TRANSITIONS[phase].includes(next)) {
    throw new WheelhouseError('internal', `${address}: illegal transition ${phase} → ${next}.`);
  }
  return next;
}

/** A promise for a phase the cell reaches (active, gone) and the way to settle it. */
export interface Signal {
  promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

export function signal(): Signal {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Messages a leaving instance accepted but did not handle. After `stop` or passivation they
 * go on to the next instance (wherever placement now puts it), in order. After fencing or at
 * shutdown they are refused with `refusal()`: asks reject, dropped tells are reported.
 */
export function handOver<M extends Message>(
  host: CellHost,
  cell: ActorAddress,
  unhandled: UnhandledMessages<M>,
  reason: DeactivationReason,
  refusal: () => WheelhouseError,
): void {
  const { messages, asks } = unhandled;
  if (messages.length === 0) return;
  if (reason === 'stopped' || reason === 'passivated') {
    for (let i = 0; i < messages.length; i++) {
      host.redeliver(cell.kind, cell.key, messages[i] as M, asks[i] ?? null);
    }
    return;
  }
  refuseUnhandled(host, cell, unhandled, refusal(), 'deliver', true);
}

/**
 * Rejects the unhandled asks with `error` and reports it if tells are dropped, or if nobody
 * heard of it otherwise (`heard`: someone awaits the outcome, an ask or an activation).
 */
export function refuseUnhandled(
  host: CellHost,
  cell: ActorAddress,
  unhandled: UnhandledMessages<unknown>,
  error: unknown,
  during: 'activate' | 'deliver',
  heard: boolean,
): void {
  let answered = heard;
  for (const ask of unhandled.asks) {
    if (ask === null) continue;
    ask.fail(error);
    answered = true;
  }
  const droppedTells = tellsIn(unhandled);
  if (droppedTells > 0 || !answered) host.report(error, { kind: cell.kind, key: cell.key, during, droppedTells });
}

/** The error of a cell whose activation a newer one fenced. */
export function fencedError(
  cell: { address: string; kind: string; key: string; epoch: number },
  cause: unknown,
): WheelhouseError {
  return new WheelhouseError(
    'stale_epoch',
    `${cell.address} was fenced: a newer activation than epoch ${cell.epoch} owns it.`,
    {
      cause,
      details: { kind: cell.kind, key: cell.key, epoch: cell.epoch },
    },
  );
}
