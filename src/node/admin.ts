import type { FastifyPluginAsync } from 'fastify';
import type { CompiledOptions } from '../lib/config.js';
import { adminRoutes } from '../http/admin-routes.js';
import { clusterRoutes } from '../http/cluster-routes.js';
import { statsRoutes } from '../http/stats-routes.js';
import { readActivity } from '../services/activity.js';
import { consoleRoutes } from '../http/console-routes.js';
import type { ApiKeysApi } from '../services/api-keys.js';
import type { Dispatcher } from '../services/dispatcher.js';
import type { WorkerChannel } from '../services/worker-channel.js';
import { ClusterRoster, MAX_LISTED_WORKERS, type ConnectedWorker } from '../services/worker-roster.js';
import { failureGroups } from '../store/sql/failures.js';
import { newestGraphs } from '../store/sql/graphs.js';
import type { Cluster } from '../runtime/cluster.js';
import { getFromPeer, inspectRemote } from '../runtime/cluster-wire.js';
import type { ClusterPeers, WorkerPresence } from '../services/worker-presence.js';
import { ActorBrowser, pageOfLocal, type LocalActors } from '../services/actor-browser.js';
import type { LivePlacement } from '../runtime/ring.js';
import type { ActorSystem } from '../runtime/system.js';
import type { Backend } from '../store/backend.js';
import type { Clock } from '../runtime/clock.js';
import { clusterStatus } from './cluster-status.js';

export interface AdminFaceDeps {
  options: CompiledOptions;
  backend: Backend;
  clock: Clock;
  system: ActorSystem;
  cluster: Cluster | null;
  placement(): LivePlacement;
  /** The URL the node listens on, once it does. */
  url(): string;
  /** This node's own workers of a task type, for the peers that explain a task. */
  presence(taskType: string): WorkerPresence;
  /** The actors of the live cluster (`actorBrowser`). */
  browser: ActorBrowser;
  keys: Pick<ApiKeysApi, 'enabled'>;
  /** This node's worker sockets and waiting long-polls, for the workers view. */
  channel: Pick<WorkerChannel, 'openSessions'>;
  dispatcher: Pick<Dispatcher, 'waitingPolls'>;
}

/** This node's connected workers: its channel sockets, then the long-polls waiting now, at most MAX_LISTED_WORKERS. */
function localWorkers(deps: Pick<AdminFaceDeps, 'options' | 'channel' | 'dispatcher'>): {
  workers: ConnectedWorker[];
  more: number;
} {
  const nodeId = deps.options.nodeId;
  const all: ConnectedWorker[] = [];
  for (const s of deps.channel.openSessions) {
    all.push({
      workerId: s.workerId,
      nodeId,
      transport: 'channel',
      taskTypes: [...s.taskTypes].sort(),
      credits: s.credits,
      leases: s.heldCount,
      sinceMs: s.openedMs,
    });
  }
  for (const p of deps.dispatcher.waitingPolls()) {
    all.push({ ...p, nodeId, transport: 'http', taskTypes: p.taskTypes.sort(), credits: null, leases: null });
  }
  return { workers: all.slice(0, MAX_LISTED_WORKERS), more: Math.max(0, all.length - MAX_LISTED_WORKERS) };
}

/** The other live nodes as the ring has them, reached over `/internal` with the cluster secret. */
export function clusterPeers(
  options: Pick<CompiledOptions, 'nodeId' | 'clusterSecret'>,
  cluster: Cluster | null,
  placement: () => LivePlacement,
): ClusterPeers {
  return {
    others: () =>
      cluster === null
        ? []
        : placement()
            .ring.nodes()
            .filter((id) => id !== options.nodeId)
            .flatMap((nodeId) => {
              const address = cluster.addressOf(nodeId);
              return address === undefined ? [] : [{ nodeId, address }];
            }),
    get: (address, path) => getFromPeer(address, options.clusterSecret, path),
  };
}

/**
 * The operator's routes (`/admin/*`: cluster, actors, queues) and the node-to-node routes
 * (`/internal/*`), wired to this node's actor system and cluster. The actors of every live
 * node are listed, and an actor that lives on another node is inspected there.
 */
/** This node's actors, live and passive, as the actor browser and the peers' list route see them. */
function localActors(deps: Pick<AdminFaceDeps, 'options' | 'system' | 'placement'>): LocalActors {
  const { options, system } = deps;
  return {
    nodeId: options.nodeId,
    // Every live actor of the node, sorted: an operator's page, not a hot path.
    list: (filter) =>
      pageOfLocal(
        system.list({ ...(filter.kind === undefined ? {} : { kind: filter.kind }), limit: Infinity }),
        filter,
      ),
    inspect: (kind, key) => system.inspect(kind, key),
    ownerOf: (kind, key) => deps.placement().ownerOf(kind, key),
  };
}

/**
 * The actors of the whole live cluster: this node's, then the ring's owner of one, then every
 * other live node over `/internal`.
 */
export function actorBrowser(deps: Pick<AdminFaceDeps, 'options' | 'system' | 'cluster' | 'placement'>): ActorBrowser {
  const { options, cluster } = deps;
  return new ActorBrowser({
    local: localActors(deps),
    peers: {
      ...clusterPeers(options, cluster, deps.placement),
      inspect: (address, kind, key) => inspectRemote(address, options.clusterSecret, kind, key),
    },
  });
}

export function adminFace(deps: AdminFaceDeps): FastifyPluginAsync[] {
  const { options, backend, system, cluster } = deps;
  const { browser } = deps;
  const local = localActors(deps);
  const roster = new ClusterRoster({
    local: () => localWorkers(deps),
    peers: clusterPeers(options, cluster, deps.placement),
  });
  return [
    consoleRoutes(
      {
        failures: (query) => failureGroups(backend.listings, query),
        workers: () => roster.all(),
        graphs: (limit, beforeId) => newestGraphs(backend.listings, limit, beforeId),
      },
      deps.keys,
    ),
    adminRoutes({
      cluster: () =>
        clusterStatus({
          nodeId: options.nodeId,
          url: deps.url(),
          partitions: options.partitions,
          ring: deps.placement().ring,
          cluster,
          heartbeatMs: options.heartbeatMs,
          snapshots: backend.snapshots,
        }),
      listActors: (filter) => browser.list(filter),
      inspectActor: (kind, key) => browser.inspect(kind, key),
      queues: () => backend.ready.depths(deps.clock.now()),
    }),
    statsRoutes({
      activity: (query) =>
        readActivity(
          { store: backend.stats, depths: () => backend.ready.depths(deps.clock.now()), nowMs: () => deps.clock.now() },
          query,
        ),
    }),
    // The embedded backend is a cluster of one: it has no node-to-node routes at all.
    ...(cluster === null
      ? []
      : [
          clusterRoutes({
            secret: options.clusterSecret,
            accept: (envelope) => system.acceptRemote(envelope),
            onRefresh: () => cluster.refresh(),
            inspect: (kind, key) => system.inspect(kind, key),
            listActors: (filter) => local.list(filter),
            presence: (taskType) => deps.presence(taskType),
            workers: () => localWorkers(deps),
            // A message wraps what the API accepted in a few levels of envelope.
            maxJsonDepth: options.maxJsonDepth + 16,
          }),
        ]),
  ];
}
