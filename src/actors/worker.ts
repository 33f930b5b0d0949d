import { defineKind, type Ask, type Behavior } from '../runtime/actor.js';

/**
 * A worker connected over a WebSocket is the actor `("worker", worker_id)` of the cluster: any
 * node reaches it through the ring, wherever its socket is. The actor lives where the ring puts
 * it; it knows which node holds the socket (the session there tells it on `hello`, again every
 * heartbeat, and when the socket closes) and forwards what is for the worker to that node's
 * `("worker-sockets", node_id)` actor, which is pinned to its node (`RingPlacementOptions.pinned`)
 * and hands the message to the local socket.
 *
 * Its state is volatile: after a passivation or a move to another node it knows nothing until
 * the session's next announcement, and a message meanwhile is dropped. Nothing depends on it
 * arriving: the session's lease heartbeats answer `cancel_requested` and refuse a lost lease,
 * so the worker hears the same within a third of the lease.
 */
export const WORKER = defineKind<WorkerMessage>('worker');

/** The node-side end of every socket of one node: `("worker-sockets", node_id)`. */
export const WORKER_SOCKETS = defineKind<WorkerSocketsMessage>('worker-sockets');

/** What the cluster may push to a connected worker. */
export type WorkerPush = { type: 'cancel'; taskIds: string[] } | { type: 'lease_lost'; taskIds: string[] };

export type WorkerMessage =
  /** The socket of session `sessionId` is open on `nodeId` (said on hello and every heartbeat). */
  | { type: 'attached'; nodeId: string; sessionId: string }
  /** That socket closed: forget it unless a newer one took its place. */
  | { type: 'detached'; nodeId: string; sessionId: string }
  /** For the worker: forwarded to the node that holds its socket, or dropped when none does. */
  | { type: 'push'; push: WorkerPush }
  /** Where the worker's socket is, null when unknown. */
  | Ask<{ type: 'where' }, string | null>;

export type WorkerSocketsMessage = { type: 'deliver'; workerId: string; push: WorkerPush };

export interface WorkerState {
  nodeId: string | null;
  sessionId: string | null;
}

/** Delivers a push to the socket of `workerId` on this node. */
export interface LocalSockets {
  /** false: no socket of this worker is open here. Never throws. */
  deliver(workerId: string, push: WorkerPush): boolean;
}

export interface WorkerActorDeps {
  /** Forgets the location of a worker heard of for this long: its sessions announce themselves more often. */
  idlePassivationMs: number;
  /** Counts pushes that found no socket. */
  onUndelivered?(workerId: string, push: WorkerPush): void;
}

export function workerBehavior(deps: WorkerActorDeps): Behavior<WorkerState, WorkerMessage> {
  return {
    kind: WORKER,
    persistence: 'external',
    idlePassivationMs: deps.idlePassivationMs,
    activate: async () => ({ nodeId: null, sessionId: null }),
    receive(state, message, ctx) {
      switch (message.type) {
        case 'attached':
          state.nodeId = message.nodeId;
          state.sessionId = message.sessionId;
          return state;
        case 'detached':
          if (state.sessionId === message.sessionId) {
            state.nodeId = null;
            state.sessionId = null;
          }
          return state;
        case 'push':
          if (state.nodeId === null) deps.onUndelivered?.(ctx.key, message.push);
          else
            ctx.system
              .ref(WORKER_SOCKETS, state.nodeId)
              .tell({ type: 'deliver', workerId: ctx.key, push: message.push });
          return state;
        case 'where':
          ctx.reply(message, state.nodeId);
          return state;
      }
    },
  };
}

export function workerSocketsBehavior(
  sockets: LocalSockets,
  onUndelivered?: (workerId: string, push: WorkerPush) => void,
): Behavior<null, WorkerSocketsMessage> {
  return {
    kind: WORKER_SOCKETS,
    persistence: 'external',
    activate: async () => null,
    receive(state, message) {
      if (!sockets.deliver(message.workerId, message.push)) onUndelivered?.(message.workerId, message.push);
      return state;
    },
  };
}
