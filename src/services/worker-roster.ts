import type { ClusterPeers } from './worker-presence.js';

/**
 * Who is connected where (the dashboard's workers view, `GET /admin/workers`): each worker
 * socket of the worker channel and each long-poll waiting now, on this node and on every other
 * live node, asked over `/internal` at once as worker presence is. A node that does not answer
 * is named in `unanswered` and its workers are missing from the list.
 */

/** How a worker reaches its node: a channel socket, or HTTP long-polls. */
export type WorkerTransport = 'channel' | 'http';

/** One connected worker on one node. */
export interface ConnectedWorker {
  workerId: string;
  nodeId: string;
  transport: WorkerTransport;
  taskTypes: string[];
  /** Tasks the node may still push to it (a channel socket); null for a long-poll, which asks per request. */
  credits: number | null;
  /** Leases its socket holds now; null for a long-poll (its leases are in its requests, not on the node). */
  leases: number | null;
  /** Since when: the socket's hello, or the start of the waiting poll. Unix ms. */
  sinceMs: number;
}

/** The node-to-node route each node answers with its own workers (src/http/cluster-routes.ts). */
export const WORKERS_PATH = '/internal/workers';

/** Most workers one node lists; more are counted in `more`. */
export const MAX_LISTED_WORKERS = 1_000;

/** One node's workers as they travel between nodes and leave the admin route. */
export interface ConnectedWorkerJson {
  worker_id: string;
  node_id: string;
  transport: WorkerTransport;
  task_types: string[];
  credits: number | null;
  leases: number | null;
  connected_since: string;
}

export function connectedWorkerJson(w: ConnectedWorker): ConnectedWorkerJson {
  return {
    worker_id: w.workerId,
    node_id: w.nodeId,
    transport: w.transport,
    task_types: w.taskTypes,
    credits: w.credits,
    leases: w.leases,
    connected_since: new Date(w.sinceMs).toISOString(),
  };
}

/** The cluster's workers: the list, how many more were not listed, and the nodes that did not answer. */
export interface WorkerRoster {
  workers: ConnectedWorkerJson[];
  more: number;
  unanswered: string[];
}

export class ClusterRoster {
  constructor(
    private readonly deps: {
      /** This node's own workers, at most `MAX_LISTED_WORKERS`, and how many more it has. */
      local(): { workers: ConnectedWorker[]; more: number };
      peers: ClusterPeers;
    },
  ) {}

  async all(): Promise<WorkerRoster> {
    const own = this.deps.local();
    const roster: WorkerRoster = { workers: own.workers.map(connectedWorkerJson), more: own.more, unanswered: [] };
    const peers = this.deps.peers.others();
    const answers = await Promise.allSettled(peers.map((peer) => this.deps.peers.get(peer.address, WORKERS_PATH)));
    answers.forEach((answer, i) => {
      const body = answer.status === 'fulfilled' ? rosterOf(answer.value) : null;
      if (body === null) {
        roster.unanswered.push((peers[i] as { nodeId: string }).nodeId);
        return;
      }
      roster.workers.push(...body.workers);
      roster.more += body.more;
    });
    roster.workers.sort((a, b) =>
      a.node_id === b.node_id ? a.worker_id.localeCompare(b.worker_id) : a.node_id.localeCompare(b.node_id),
    );
    return roster;
  }
}

/** A peer's answer (already held to its schema by the peer), or null when it is not one. */
function rosterOf(body: unknown): { workers: ConnectedWorkerJson[]; more: number } | null {
  const b = body as { workers?: unknown; more?: unknown } | null;
  if (b === null || typeof b !== 'object' || !Array.isArray(b.workers) || typeof b.more !== 'number') return null;
  return { workers: b.workers as ConnectedWorkerJson[], more: b.more };
}
