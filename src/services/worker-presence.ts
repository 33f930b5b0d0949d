/** The workers of one task type: on one node, or summed over the cluster. */
export interface WorkerPresence {
  /** Worker-channel sockets open whose worker takes the type. */
  connected: number;
  /** Long-polls waiting now that name the type. */
  polling: number;
  /** When a worker last asked for the type (a poll or a channel claim), Unix ms; null: none seen. */
  lastAskedMs: number | null;
}

/** The other live nodes of the cluster, and a way to GET a node-to-node route of one. */
export interface ClusterPeers {
  /** The live nodes other than this one, with their base URLs. None on the embedded backend. */
  others(): { nodeId: string; address: string }[];
  /** The JSON body of a node's `/internal` route; rejects when the node does not answer 200. */
  get(address: string, path: string): Promise<unknown>;
}

/** The node-to-node route each node answers with its own presence (src/http/cluster-routes.ts). */
export const PRESENCE_PATH = '/internal/workers/presence';

/** One node's presence as it travels between nodes. */
export interface PresenceJson {
  connected: number;
  polling: number;
  last_asked_ms: number | null;
}

export function presenceJson(presence: WorkerPresence): PresenceJson {
  return { connected: presence.connected, polling: presence.polling, last_asked_ms: presence.lastAskedMs };
}

/**
 * Worker presence across the live cluster: this node's own (its dispatcher's waiting polls and
 * its worker channel's sockets), plus each other live node's, asked over `/internal` at once.
 * A node that does not answer is left out of the sums and named in `unanswered`.
 */
export class ClusterPresence {
  constructor(
    private readonly deps: {
      local(taskType: string): WorkerPresence;
      peers: ClusterPeers;
    },
  ) {}

  async of(taskType: string): Promise<WorkerPresence & { unanswered: string[] }> {
    const total: WorkerPresence & { unanswered: string[] } = { ...this.deps.local(taskType), unanswered: [] };
    const path = `${PRESENCE_PATH}?task_type=${encodeURIComponent(taskType)}`;
    const peers = this.deps.peers.others();
    const answers = await Promise.allSettled(peers.map((peer) => this.deps.peers.get(peer.address, path)));
    answers.forEach((answer, i) => {
      const body = answer.status === 'fulfilled' ? presenceOf(answer.value) : null;
      if (body === null) {
        total.unanswered.push((peers[i] as { nodeId: string }).nodeId);
        return;
      }
      total.connected += body.connected;
      total.polling += body.polling;
      if (body.lastAskedMs !== null && (total.lastAskedMs === null || body.lastAskedMs > total.lastAskedMs)) {
        total.lastAskedMs = body.lastAskedMs;
      }
    });
    return total;
  }
}

/** A peer's answer, or null when it is not one. */
function presenceOf(body: unknown): WorkerPresence | null {
  const b = body as Partial<PresenceJson> | null;
  if (b === null || typeof b !== 'object' || typeof b.connected !== 'number' || typeof b.polling !== 'number') {
    return null;
  }
  const last = typeof b.last_asked_ms === 'number' ? b.last_asked_ms : null;
  return { connected: b.connected, polling: b.polling, lastAskedMs: last };
}
