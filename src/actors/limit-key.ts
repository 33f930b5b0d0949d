import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import type { DueEntry } from '../domain/model.js';
import { RateWindow } from '../domain/limits.js';
import { compareUrgency } from './limit-waiting.js';
import {
  admissionRoom,
  decodeLimitSnapshot,
  ADMITTED_TTL_MS,
  dropEndedHolders,
  duplicateOf,
  eager,
  expireAdmitted,
  grantOrRefuse,
  offeredBack,
  onArrival,
  openRoom,
  readmit,
  reconcile,
  sameLimit,
  takeMerged,
} from './limit-rules.js';
import {
  freshState,
  idleForMs,
  isNew,
  view,
  type LimitKeyDeps,
  type LimitKeyState,
  type LimitLiveView,
  type LimitSnapshot,
} from './limit-state.js';
import { trace } from '../lib/trace.js';

export type { LimitKeyDeps, LimitKeyState, LimitLiveView } from './limit-state.js';
export { QUIET_PASSIVATION_MS } from './limit-state.js';

/**
 * One limit key (`("limit", name)`: `stripe-api`, `customer:42`, `type:email.send`), on the
 * node the ring names (docs/decisions/0023-flow-control.md). It admits its waiting tasks into
 * the ready queue a window at a time and grants the permits the claims ask for; both stay
 * within the key's concurrency and rate. Its snapshot is its declaration; its counts are not
 * kept anywhere: on activation it reads the key's live tasks, the `running` rows that name it
 * (its permits: a permit is a lease), and the due `pending` ones (its waiting tasks). Its
 * activation epoch — its row in `actor_snapshots` — fences its grants: a claim uses a grant
 * only while that row still carries the epoch the grant was made under.
 */
export const LIMIT = defineKind<LimitMessage, LimitSnapshot>('limit', { version: 1, decode: decodeLimitSnapshot });

/**
 * The answer to `grant`: the tasks that may start, under this activation's epoch, and those
 * that hold a permit already (duplicates: they must not start again).
 */
export interface LimitGrant {
  epoch: number;
  granted: string[];
  held: string[];
  /** When the grants were made (this node's clock): the start its rate counted. */
  atMs: number;
  /**
   * How many more of the key's tasks a gate may push to the ready queue itself, without
   * offering them (0: offer them). See `openRoom`.
   */
  openRoom: number;
}

export type LimitMessage =
  /**
   * Due tasks whose home is this key: a wheel fired them (`fired`), or the safety net found
   * them loose, a claim refused them, an activation that ended handed them on (`handed`).
   */
  | { type: 'offer'; entries: DueEntry[]; fired?: boolean; handed?: boolean }
  /** The next slice of a large offer, from the key's inbox (`LimitInbox`). */
  | { type: 'absorb' }
  /** A claim took these tasks from a ready queue: which may start now? The rest wait here. */
  | Ask<{ type: 'grant'; entries: DueEntry[] }, LimitGrant>
  /** Permits back: the attempts ended (their leases did), or a grant went unused. */
  | { type: 'returned'; taskIds: string[] }
  /** The declaration may have changed: resolve it again. */
  | { type: 'changed' }
  /**
   * Due tasks read back from the task table: the next of the key's waiting tasks, when its
   * activation read only the most urgent of them (`more`: still more than were read).
   */
  | { type: 'read'; entries: DueEntry[]; more: boolean }
  /** The timer: the rate allows more starts, or the holders are due a reconcile. */
  | { type: 'tick' }
  /** A push of admitted entries failed: they wait here again. */
  | { type: 'unpushed'; entries: DueEntry[] }
  /**
   * A claim refused tasks this key granted though they were still pending: the grants' epoch
   * may no longer be the key's row's (another activation took it over). The key checks.
   */
  | { type: 'verify' }
  | Ask<{ type: 'inspect' }, LimitLiveView>;

const UNPUSHED_RETRY_MS = 500; // after a failed push of admitted tasks, before the key pumps again
type Ctx = ActorContext<LimitMessage, LimitSnapshot>;

export function limitKeyBehavior(deps: LimitKeyDeps): Behavior<LimitKeyState, LimitMessage, LimitSnapshot> {
  return {
    kind: LIMIT,
    persistence: 'snapshot',
    idlePassivationMs: deps.idlePassivationMs,
    idlePassivationMsFor: (state, nowMs) => idleForMs(state, nowMs, deps.idlePassivationMs),
    async activate(ctx, snapshot) {
      const now = ctx.clock.now();
      let limit = deps.resolve(ctx.key);
      // Declared on another node a moment ago: this node's catalog reads it now.
      if (limit === null) {
        await deps.reload();
        limit = deps.resolve(ctx.key);
      }
      const t0 = Date.now();
      const running = await deps.holders(ctx.key);
      trace('activate', { key: ctx.key, liveMs: Date.now() - t0, sinceNowMs: Date.now() - now });
      const state = freshState(limit, running, now);
      // The snapshot is a copy of the declaration, which lives in `limits`: written when it
      // changes (`refreshLimit`), not by every activation — a key's first activation costs
      // its ownership statement and its holders' read, nothing more.
      if (snapshot !== null && !sameLimit(snapshot, limit)) ctx.snapshot(limit).catch(() => undefined);
      // No pump here: the message that activated the key comes next, and its pump reads the
      // waiting tasks (`readMore`) only if few wait after it — not a flood's key offered 200 000.
      return state;
    },
    /**
     * The tasks waiting here live in this memory only (their rows say pending, nothing more):
     * an activation that ends — idle, handed off by a ring change, dropped by a node that was
     * declared out while paused — offers them to the key's owner now. A new activation reads
     * the key's waiting tasks once, when it starts; a stale one (the paused node, awake again
     * before it learns it was declared out) can still park tasks its claims took after that
     * read, and without this they waited for the safety net (tens of seconds); the owner takes
     * them back even if it counts them admitted (`readmit`). A node that shuts down cannot
     * route them yet (it is still in its own ring): the net finds them.
     */
    async deactivate(state, _ctx, reason) {
      if (reason === 'shutdown') return;
      const waiting = [...state.inbox.take(state.inbox.size), ...state.waiting.take(state.waiting.size)];
      if (waiting.length > 0) deps.handOn(waiting);
    },
    describe: (state) => ({
      declaredAs: state.limit?.declaredAs ?? null,
      concurrency: state.limit?.concurrency ?? null,
      holders: state.holders.size,
      admitted: state.admitted.size,
      waiting: state.waiting.size,
      /** Offered, not yet taken in (a large offer goes in a slice a message). */
      offered: state.inbox.size,
      waitingIds: state.waiting.ids(20),
    }),
    async receive(state, message, ctx) {
      refreshLimit(state, ctx, deps);
      const now = ctx.clock.now();
      if (message.type === 'offer' && message.handed === true) readmit(state, message.entries);
      // A large offer waits in the inbox and is taken in a slice a message (`absorb`).
      const offered =
        message.type === 'offer' || message.type === 'absorb' ? state.inbox.takeIn(message, !eager(state)) : null;
      const looked = offered ?? (message.type === 'grant' || message.type === 'read' ? message.entries : null);
      if (looked !== null) await dropEndedHolders(state, looked, now, deps);
      switch (message.type) {
        case 'absorb':
        case 'read':
        case 'offer': {
          let entries = message.type === 'read' ? message.entries : (offered ?? []);
          const fired = message.type === 'offer' && message.fired === true && !eager(state);
          // The first read brings the tasks parked by an earlier activation: they arrived
          // there, and a strategy decided on them then.
          let arriving = true;
          if (message.type === 'read') {
            // Tasks a wheel fired here meanwhile wait unindexed in the inbox: a read that
            // brings them again leaves them there (rare, so looked for by a pass over it).
            if (state.inbox.size > 0) {
              const kept = state.inbox.holding(new Set(entries.map((e) => e.taskId)));
              if (kept.size > 0) entries = entries.filter((e) => !kept.has(e.taskId));
            }
            // A read asks for as many more as the key holds (`readMore`): one that brings
            // nothing new found none left.
            state.reading = false;
            state.unread = message.more && entries.some((e) => isNew(state, e.taskId));
            arriving = state.readOnce;
            state.readOnce = true;
          }
          // A strategy decides on arrival, with the task among the waiting ones.
          const strategy = arriving && state.limit?.onLimit !== undefined && state.limit.onLimit !== 'queue';
          const fresh: DueEntry[] = [];
          for (const entry of entries) {
            const id = entry.taskId;
            // One already waiting is dropped by `add` (a flood's entries looked up once).
            if (duplicateOf(state, entry, now, message.type !== 'read')) continue;
            // A fired task a read brought first waits in the waiting set already.
            if (fired && state.waiting.has(id)) continue;
            if (!strategy) fresh.push(entry);
            else if (state.waiting.add(entry)) onArrival(state, entry, deps);
          }
          await pump(state, ctx, deps, fresh, fired);
          return state;
        }
        case 'grant': {
          const { granted, held } = grantOrRefuse(state, message.entries, now, deps);
          const open = openRoom(state, now, deps.admitWindow);
          ctx.reply(message, { epoch: ctx.epoch, granted, held, atMs: now, openRoom: open });
          break;
        }
        case 'returned':
          for (const id of message.taskIds) {
            state.holders.delete(id);
            state.admitted.delete(id);
            state.cancelling.delete(id);
          }
          await pump(state, ctx, deps, offeredBack(state, message.taskIds, now));
          return state;
        case 'changed': // pumped below, with the declaration taken in
          break;
        case 'unpushed':
          // Pumped again after a pause (not at once: a down queue would spin); no other message may come.
          for (const entry of message.entries) {
            if (state.admitted.delete(entry.taskId)) state.waiting.add(entry);
          }
          ctx.schedule(UNPUSHED_RETRY_MS, { type: 'changed' });
          return state;
        case 'verify':
          await verifyOwner(state, ctx, now);
          break;
        case 'tick':
          state.tickAtMs = null;
          state.cancelTick = null;
          await reconcile(state, now, deps);
          break;
        case 'inspect':
          ctx.reply(message, view(state, ctx.key, now));
          break;
      }
      await pump(state, ctx, deps);
      return state;
    },
  };
}

/** Takes a changed declaration in (the catalog is the node's; the snapshot follows it). */
function refreshLimit(state: LimitKeyState, ctx: Ctx, deps: LimitKeyDeps): void {
  const limit = deps.resolve(ctx.key);
  if (sameLimit(state.limit, limit)) return;
  const rateChanged = JSON.stringify(state.limit?.rate ?? null) !== JSON.stringify(limit?.rate ?? null);
  state.limit = limit;
  if (rateChanged) state.rate = limit?.rate ? new RateWindow(limit.rate) : null;
  ctx.snapshot(limit).catch(() => undefined); // the declaration is in `limits`; the snapshot is its copy
}

/**
 * Pushes the most urgent waiting tasks into the ready queue while the key has room —
 * concurrency (holders and admitted), the rate's allowance now, and its window — and arms
 * the timer for the next rate allowance or reconcile.
 */
async function pump(
  state: LimitKeyState,
  ctx: Ctx,
  deps: LimitKeyDeps,
  offered: readonly DueEntry[] = [],
  fired = false,
): Promise<void> {
  const now = ctx.clock.now();
  expireAdmitted(state, now);
  const waiting = state.waiting.size + state.inbox.size;
  const { room, throttled } = admissionRoom(state, now, deps.admitWindow, waiting + offered.length);
  // What a wheel fired for a queue key waits in its inbox (`LimitInbox.stage`): a wheel fires
  // a task once. The rest — a read, the safety net's offers of tasks the key may hold already,
  // whatever a strategy key is offered — wait in its waiting set, which knows each task once.
  const keep = (entries: readonly DueEntry[]): void => {
    if (fired) state.inbox.stage(entries);
    else for (const entry of entries) state.waiting.add(entry);
  };
  // Offered tasks go straight through while nothing waits before them (a key that is not
  // binding: the common case); the rest wait.
  let entries: DueEntry[];
  if (offered.length > 0 && waiting === 0) {
    const ordered = [...offered].sort(compareUrgency);
    entries = ordered.slice(0, Math.max(0, room));
    keep(ordered.slice(entries.length));
  } else {
    keep(offered);
    entries = room <= 0 ? [] : eager(state) ? state.waiting.take(room) : takeMerged(state, room, now);
  }
  if (entries.length > 0) {
    for (const entry of entries) state.admitted.set(entry.taskId, now);
    pushAdmitted(state, ctx, deps, entries);
  }
  armTick(state, ctx, deps, throttled && state.waiting.size + state.inbox.size > 0);
  readMore(state, ctx, deps);
  // A strategy key takes a large offer in a slice a turn of the event loop, by the node's
  // timers, so that other keys' round trips do not wait behind ten slices (W6: the loop was
  // busy from T to T + 620 ms). A queue key admits from its inbox as it gets room.
  if (eager(state)) state.inbox.askIfLeft(() => ctx.schedule(0, { type: 'absorb' }));
}

/**
 * Sends admitted entries to the ready queue without holding the key's turn, those of many
 * turns in one push: while a push is under way, the next ones gather and go together when it
 * has landed. Awaited in the turn, each offer's push (a wheel partition's few entries, 64
 * partitions firing) held the key's mailbox for its round trip, and a claim's grant waited
 * behind them: 1.1 s for the first grant of W1L, behind 130 pushes of 15 entries (issue 28).
 * Admission starts nothing (the grant does), so an entry counted admitted before its push
 * lands costs only room; one whose push failed comes back here (`unpushed`).
 */
function pushAdmitted(state: LimitKeyState, ctx: Ctx, deps: LimitKeyDeps, entries: readonly DueEntry[]): void {
  for (const entry of entries) state.unsent.push(entry);
  if (state.pushing) return;
  const batch = state.unsent;
  state.unsent = [];
  state.pushing = true;
  deps.ready.push(batch).then(
    () => {
      state.pushing = false;
      if (state.unsent.length > 0) pushAdmitted(state, ctx, deps, []);
    },
    () => {
      state.pushing = false;
      try {
        ctx.self.tell({ type: 'unpushed', entries: batch });
      } catch {
        // A full mailbox: they are still pending in the task table; the safety net offers them again.
      }
      if (state.unsent.length > 0) pushAdmitted(state, ctx, deps, []);
    },
  );
}

/**
 * An activation reads its holders alone; its waiting tasks — those parked in a memory that is
 * gone (a node that died) — are read here, the most urgent batch each time fewer than
 * `readMoreBelow` wait in memory, the first time after the message that activated the key. A
 * flood's key reads them once the flood has drained: its read at activation went through all
 * its rows at T (550 ms of Postgres beside every other key's claims). The wheel offers the rest
 * as they fire; those it holds already are dropped as duplicates. The read asks for as many
 * more as may be duplicates — admitted, waiting, and a window of grants whose claims may not
 * have landed — so that a read that brings nothing new has found none left (a window as large
 * as a read filled it with duplicates, and the rest waited for the safety net).
 */
function readMore(state: LimitKeyState, ctx: Ctx, deps: LimitKeyDeps): void {
  if (!state.unread || state.reading || state.waiting.size + state.inbox.size >= deps.readMoreBelow) return;
  state.reading = true;
  const held = state.admitted.size + state.waiting.size + state.inbox.size + deps.admitWindow;
  deps
    .waitingTasks(ctx.key, ctx.clock.now(), held)
    .then((read) => ctx.self.tell({ type: 'read', entries: read.waiting, more: read.truncated }))
    .catch(() => {
      state.reading = false; // a failed read or a full mailbox: the next pump tries again
    });
}

function armTick(state: LimitKeyState, ctx: Ctx, deps: LimitKeyDeps, throttled: boolean): void {
  const now = ctx.clock.now();
  let at = Infinity;
  if (throttled && state.rate) at = state.rate.nextAllowedMs(now) + state.admitted.size * state.rate.intervalMs;
  // A reconcile checks holders: with none, the only timed work of a key without a rate is
  // forgetting the admitted entries no claim asked about. 100 000 keys with one admitted task
  // each ticking every `reconcileMs` for nothing cost 640 ms of CPU a second. A rate key keeps
  // the tick: the lighter one was measured with it only on a build whose claims recorded the
  // wrong start (64 of 50 in a window, since fixed: decision 0024), so not yet without cause.
  const busy = state.holders.size > 0 || state.rate !== null;
  if (busy && (state.waiting.size > 0 || state.inbox.size > 0 || state.admitted.size > 0)) {
    at = Math.min(at, now + deps.reconcileMs);
  } else if (state.admitted.size > 0) {
    const oldest = state.admitted.values().next().value as number;
    at = Math.min(at, Math.max(now + deps.reconcileMs, oldest + ADMITTED_TTL_MS + 1));
  }
  if (at === Infinity) return;
  if (state.tickAtMs !== null && state.tickAtMs <= at) return;
  state.cancelTick?.();
  state.tickAtMs = at;
  state.cancelTick = ctx.schedule(Math.max(1, at - now), { type: 'tick' });
}

/** How often a key checks that its activation still owns it, when claims suggest it may not. */
const VERIFY_EVERY_MS = 1_000;
/**
 * Writes the key's snapshot under this activation's epoch: if another activation took the key
 * over (a node cut off from Redis, out of the ring and back, keeps its own), the write is
 * refused `stale_epoch` and the runtime stops this one; the next message starts a new one,
 * which reads the key's live tasks. Without it, a stale activation kept granting under its
 * old epoch, every claim refused its grants, and its tasks never ran (nemesis run D: 385).
 */
async function verifyOwner(state: LimitKeyState, ctx: Ctx, now: number): Promise<void> {
  if (now - state.verifiedAtMs < VERIFY_EVERY_MS) return;
  state.verifiedAtMs = now;
  await ctx.snapshot(state.limit);
}
