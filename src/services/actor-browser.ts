import { WheelhouseError } from '../lib/errors.js';
import type { ActorInfo } from '../runtime/actor.js';
import type { ClusterPeers } from './worker-presence.js';

/** The node-to-node route each node answers with its own live actors (src/http/cluster-routes.ts). */
export const ACTOR_LIST_PATH = '/internal/actors';

/** Where a page of actors ends: the last one shown, in (node, kind, key) order. */
export interface ActorCursor {
  node: string;
  kind: string;
  key: string;
}

export interface ActorListFilter {
  kind?: string;
  node?: string;
  limit: number;
  /** Actors after this one only (exclusive). */
  after?: ActorCursor;
}

export interface ActorPage {
  actors: ActorInfo[];
  /** The last actor of a page that has more after it; null on the last page. */
  next: ActorCursor | null;
  /** Every node asked, and whether it answered (a node that did not has no actors here). */
  nodes: { nodeId: string; ok: boolean }[];
}

/** What one node lists of its own: live actors of a kind after (kind, key), in (kind, key) order. */
export interface LocalActors {
  nodeId: string;
  list(filter: { kind?: string; limit: number; after?: { kind: string; key: string } }): ActorInfo[];
  inspect(kind: string, key: string): ActorInfo | null;
  /** The node the ring names for an actor. */
  ownerOf(kind: string, key: string): string;
}

/** The peers, and how to look at one actor on one of them (null: it does not hold it). */
export interface ActorPeers extends ClusterPeers {
  inspect(address: string, kind: string, key: string): Promise<ActorInfo | null>;
}

/**
 * The actors of the whole cluster for the operator: each live node lists its own (this one in
 * process, the others over `/internal`, all at once) and the answers are merged in (node, kind,
 * key) order and paged. A node that does not answer is named with `ok: false`, never an error.
 * One actor is found on the ring's owner, or, when the owner does not hold it (a lease on the
 * node that claimed the task, an actor in hand-over), on whichever live node does.
 */
export class ActorBrowser {
  constructor(private readonly deps: { local: LocalActors; peers: ActorPeers }) {}

  async list(filter: ActorListFilter): Promise<ActorPage> {
    const { local, peers } = this.deps;
    const all = [{ nodeId: local.nodeId, address: null as string | null }, ...peers.others()]
      .filter((n) => filter.node === undefined || n.nodeId === filter.node)
      .filter((n) => filter.after === undefined || n.nodeId >= filter.after.node)
      .sort((a, b) => compare(a.nodeId, b.nodeId));
    // One more than the page, so that a full page knows whether anything follows it.
    const want = filter.limit + 1;
    const answers = await Promise.allSettled(
      all.map(async (n) => {
        const after =
          filter.after !== undefined && filter.after.node === n.nodeId
            ? { kind: filter.after.kind, key: filter.after.key }
            : undefined;
        const options = {
          ...(filter.kind === undefined ? {} : { kind: filter.kind }),
          limit: want,
          ...(after ? { after } : {}),
        };
        if (n.address === null) return local.list(options);
        const query = new URLSearchParams({ limit: String(want) });
        if (options.kind !== undefined) query.set('kind', options.kind);
        if (after !== undefined) {
          query.set('after_kind', after.kind);
          query.set('after_key', after.key);
        }
        return actorsOf(await peers.get(n.address, `${ACTOR_LIST_PATH}?${query.toString()}`));
      }),
    );
    const merged: ActorInfo[] = [];
    const nodes = all.map((n, i) => {
      const answer = answers[i] as PromiseSettledResult<ActorInfo[]>;
      if (answer.status === 'fulfilled') merged.push(...answer.value.map((a) => ({ ...a, node: n.nodeId })));
      return { nodeId: n.nodeId, ok: answer.status === 'fulfilled' };
    });
    merged.sort((a, b) => compare(a.node, b.node) || compare(a.kind, b.kind) || compare(a.key, b.key));
    const actors = merged.slice(0, filter.limit);
    const last = actors[actors.length - 1];
    const more = merged.length > filter.limit;
    return { actors, next: more && last ? { node: last.node, kind: last.kind, key: last.key } : null, nodes };
  }

  async inspect(kind: string, key: string): Promise<ActorInfo | null> {
    const { local, peers } = this.deps;
    const here = local.inspect(kind, key);
    if (here !== null) return here;
    const others = peers.others();
    const owner = others.find((n) => n.nodeId === local.ownerOf(kind, key));
    if (owner !== undefined) {
      const found = await peers.inspect(owner.address, kind, key).catch(() => null);
      if (found !== null) return found;
    }
    const rest = others.filter((n) => n !== owner);
    const answers = await Promise.allSettled(rest.map((n) => peers.inspect(n.address, kind, key)));
    for (const answer of answers) if (answer.status === 'fulfilled' && answer.value !== null) return answer.value;
    return null;
  }
}

/** Plain code-unit order, the same on every node (never the locale's). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function actorsOf(body: unknown): ActorInfo[] {
  const actors = (body as { actors?: unknown } | null)?.actors;
  if (!Array.isArray(actors)) throw new WheelhouseError('not_ready', 'a peer answered its actors without a list');
  return actors as ActorInfo[];
}

/** Sorts and pages one node's live actors: what `LocalActors.list` answers from a plain listing. */
export function pageOfLocal(
  actors: ActorInfo[],
  filter: { limit: number; after?: { kind: string; key: string } },
): ActorInfo[] {
  const after = filter.after;
  return actors
    .filter(
      (a) =>
        after === undefined ||
        compare(a.kind, after.kind) > 0 ||
        (a.kind === after.kind && compare(a.key, after.key) > 0),
    )
    .sort((a, b) => compare(a.kind, b.kind) || compare(a.key, b.key))
    .slice(0, filter.limit);
}
