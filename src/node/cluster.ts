import type { FastifyBaseLogger } from 'fastify';
import type { NodeEvents } from '../domain/events.js';
import type { EventSink } from '../lib/events.js';
import { WHEEL } from '../actors/wheel-partition.js';
import type { CompiledOptions } from '../lib/config.js';
import { Cluster } from '../runtime/cluster.js';
import { formatSpread, type RingPlacementOptions } from '../runtime/ring.js';
import type { ActorSystem } from '../runtime/system.js';
import type { Backend } from '../store/backend.js';
import type { Ownership } from './ownership.js';

export interface NodeClusterDeps {
  options: CompiledOptions;
  backend: Backend;
  ring: RingPlacementOptions;
  /** The node's actor system and ownership, built after the cluster (they route by it). */
  system(): ActorSystem;
  ownership(): Ownership;
  onHandedOff(count: number): void;
  events: EventSink<NodeEvents>;
  log: FastifyBaseLogger;
  onError(error: unknown, context: string): void;
  /** Whether this node reaches Redis now (its heartbeat says so). */
  redisReachable?: () => boolean;
}

/**
 * A Postgres + Redis node's part in the cluster, and what the node does when the ring moves:
 * hand off what went elsewhere and take over what came here — or, when the others had
 * declared this node out (a long pause), drop everything it held without writing first.
 */
export function nodeCluster(deps: NodeClusterDeps): Cluster {
  const { options, log } = deps;
  const cluster: Cluster = new Cluster({
    nodeId: options.nodeId,
    store: deps.backend.membership,
    secret: options.clusterSecret,
    heartbeatMs: options.heartbeatMs,
    failureTimeoutMs: options.failureTimeoutMs,
    ring: deps.ring,
    deliverLocal: (envelope) => deps.system().acceptRemote(envelope),
    onRingChange: async ({ before, after }) => {
      const spread = formatSpread(after.spread(WHEEL.name, deps.ring.bounded?.get(WHEEL.name) ?? []));
      log.info({ before: before.nodes(), after: after.nodes(), partitions: spread }, 'ring changed');
      deps.events.emit('ring:changed', { nodes: after.nodes() });
      if (!cluster.mayOwn) return; // the rejoin after being declared out takes over
      const pass = await deps.ownership().takeOwnership();
      deps.onHandedOff(pass.handedOff);
      log.info({ ...pass, nodes: after.nodes() }, 'took over the actors the ring now puts here');
    },
    onDeclaredOut: async () => {
      // Paused or cut off past the failure timeout: others may hold newer activations of
      // everything this node ran. Drop it all without writing, then take what is ours now.
      log.warn('this node was declared out of the cluster and has rejoined; dropping its actors');
      await deps.system().dropAll();
      await deps.ownership().takeOwnership();
    },
    onError: deps.onError,
    ...(deps.redisReachable === undefined ? {} : { redisReachable: deps.redisReachable }),
  });
  return cluster;
}
