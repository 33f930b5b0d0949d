import type { DueEntry } from '../domain/model.js';
import { MAX_CONCURRENCY, ON_LIMIT, type OnLimit, type ResolvedLimit } from '../domain/limits.js';
import type { LimitKeyDeps, LimitKeyState, LimitSnapshot } from './limit-state.js';
import { compareUrgency } from './limit-waiting.js';

/** Reads a snapshot back; throws on a shape it does not know (the activation fails). */
export function decodeLimitSnapshot(raw: unknown, version: number): LimitSnapshot {
  if (raw === null) return null;
  if (version !== 1 || typeof raw !== 'object') throw new Error(`limit snapshot v${version}: unknown shape`);
  const s = raw as Partial<ResolvedLimit>;
  if (typeof s.key !== 'string' || typeof s.declaredAs !== 'string' || !ON_LIMIT.includes(s.onLimit as OnLimit))
    throw new Error('limit snapshot: unknown shape');
  return {
    key: s.key,
    declaredAs: s.declaredAs,
    concurrency: typeof s.concurrency === 'number' ? s.concurrency : null,
    rate: s.rate ?? null,
    onLimit: s.onLimit as OnLimit,
    weight: typeof s.weight === 'number' ? s.weight : 1,
    family: typeof s.family === 'string' ? s.family : null,
  };
}

/** Whether two declarations apply the same values. */
export function sameLimit(a: LimitSnapshot | undefined, b: LimitSnapshot): boolean {
  if (!a || !b) return (a ?? null) === b;
  return (
    a.declaredAs === b.declaredAs &&
    a.concurrency === b.concurrency &&
    a.onLimit === b.onLimit &&
    a.weight === b.weight &&
    a.family === b.family &&
    a.rate?.limit === b.rate?.limit &&
    a.rate?.periodMs === b.rate?.periodMs &&
    a.rate?.burst === b.rate?.burst
  );
}

/**
 * Answers a claim's ask: each task, most urgent first, starts if the key has room — fewer
 * holders than its concurrency, and a start the rate allows now — and holds a permit from
 * then on; the others wait here (or meet their `on_limit`). A task that already holds a
 * permit is granted again (the same claim asking twice). With no declaration, every task
 * may start.
 */
export function grantOrRefuse(
  state: LimitKeyState,
  entries: readonly DueEntry[],
  now: number,
  deps: Pick<LimitKeyDeps, 'events' | 'cancel'>,
): { granted: string[]; held: string[] } {
  const granted: string[] = [];
  const held: string[] = [];
  const limit = state.limit;
  let throttled = 0;
  // The order decides who is refused: none is when all fit (the common case, a thousand a claim).
  const ordered = fitsAll(state, entries.length, now) ? entries : [...entries].sort(compareUrgency);
  for (const entry of ordered) {
    const id = entry.taskId;
    if (state.holders.has(id)) {
      held.push(id);
      continue;
    }
    state.admitted.delete(id);
    const concurrencyRoom = !limit || limit.concurrency === null || state.holders.size < limit.concurrency;
    const rateRoom = !state.rate || state.rate.available(now, 1) >= 1;
    if (concurrencyRoom && rateRoom) {
      state.waiting.delete(id);
      state.holders.set(id, now);
      if (now < state.holdersFloorMs) state.holdersFloorMs = now;
      state.rate?.take(now);
      granted.push(id);
      continue;
    }
    if (!rateRoom && concurrencyRoom) throttled++;
    if (state.waiting.add(entry) && !concurrencyRoom && limit?.onLimit === 'cancel_new') {
      state.waiting.delete(id);
      deps.cancel(
        [id],
        `cancelled by cancel_new on limit ${limit.key}: it was at its concurrency (${limit.concurrency})`,
      );
    }
  }
  if (throttled > 0 && limit)
    deps.events.emit('limit:throttled', { key: limit.key, declaredAs: limit.declaredAs, count: throttled });
  return { granted, held };
}

/** Whether `n` more tasks could all start now: room for them under the concurrency and the rate. */
function fitsAll(state: LimitKeyState, n: number, now: number): boolean {
  const concurrency = state.limit?.concurrency ?? null;
  if (concurrency !== null && state.holders.size + n > concurrency) return false;
  return state.rate === null || state.rate.available(now, n) >= n;
}

/**
 * The window of a key in no family: not fairness but a bound, so that a key with neither a
 * concurrency nor a rate answers a finite room (`LimitGrant.openRoom` crosses the cluster as
 * JSON). The largest concurrency one may declare.
 */
const UNSHARED_WINDOW = MAX_CONCURRENCY;

/**
 * How many more entries the key may put in the ready queue now: its window (`admitWindow` ×
 * weight, less those admitted and not yet granted) if it shares its workers with a family's
 * other keys, its concurrency's room (less holders and admitted) and the rate's allowance now,
 * at most `wanted`. `throttled`: the rate is what held it below `wanted`'s other bounds.
 */
export function admissionRoom(
  state: LimitKeyState,
  now: number,
  admitWindow: number,
  wanted: number,
): { room: number; throttled: boolean } {
  const limit = state.limit;
  let room = Math.min(UNSHARED_WINDOW - state.admitted.size, wanted);
  // The window is fairness: how far one key's backlog may sit ahead of its family's other keys
  // in the ready queue. A key in no family has none to share with (decision 0051).
  if (limit === null || limit.family !== null)
    room = Math.min(room, Math.max(1, Math.round(admitWindow * (limit?.weight ?? 1))) - state.admitted.size);
  if (limit?.concurrency != null) room = Math.min(room, limit.concurrency - state.holders.size - state.admitted.size);
  let throttled = false;
  if (state.rate && room > 0) {
    const allowed = state.rate.available(now, room + state.admitted.size) - state.admitted.size;
    if (allowed < room) throttled = true;
    room = Math.min(room, allowed);
  }
  return { room, throttled };
}

/**
 * How many of its tasks a gate may push into the ready queue itself, without offering them
 * here (docs/decisions/0023-flow-control.md, "Fast admission"): the key's room while nothing
 * waits and its `on_limit` is `queue`; 0 otherwise (the tasks must pass here: to wait their
 * turn, or for a strategy to see them arrive). Admission starts nothing — the grant does —
 * so a gate that pushes a few too many only puts them back here at their claim.
 */
export function openRoom(state: LimitKeyState, now: number, admitWindow: number): number {
  if (state.waiting.size > 0 || state.inbox.size > 0) return 0;
  if (state.limit && state.limit.onLimit !== 'queue') return 0;
  return Math.max(0, admissionRoom(state, now, admitWindow, Infinity).room);
}

/**
 * A task arrived while the key has no room: `cancel_new` cancels it, `keep_latest_waiting`
 * the ones that waited before it, `cancel_running` the oldest running one (the new one waits
 * for its permit, so the key is never over its concurrency).
 */
export function onArrival(state: LimitKeyState, entry: DueEntry, deps: LimitKeyDeps): void {
  const limit = state.limit;
  if (!limit || limit.concurrency === null || limit.onLimit === 'queue') return;
  if (state.holders.size + state.admitted.size < limit.concurrency) return;
  const why = `${limit.onLimit} on limit ${state.limit?.key}`;
  if (limit.onLimit === 'cancel_new') {
    state.waiting.delete(entry.taskId);
    deps.cancel([entry.taskId], `cancelled by ${why}: it was at its concurrency (${limit.concurrency})`);
  } else if (limit.onLimit === 'keep_latest_waiting') {
    // The newest by creation among those waiting and those admitted: arrival order is no
    // guide (a batch reaches the key from several wheel partitions at once).
    let newest = state.waiting.newest();
    for (const id of state.admitted.keys()) if (newest === null || id > newest) newest = id;
    const older = [...state.waiting.takeAllBut(newest), ...[...state.admitted.keys()].filter((id) => id !== newest)];
    for (const id of older) state.admitted.delete(id);
    if (older.length > 0) deps.cancel(older, `cancelled by ${why}: a newer task of the key arrived`);
  } else if (limit.onLimit === 'cancel_running') {
    let oldest: string | null = null;
    let oldestMs = Infinity;
    for (const [id, since] of state.holders) {
      if (!state.cancelling.has(id) && since < oldestMs) {
        oldest = id;
        oldestMs = since;
      }
    }
    if (oldest !== null) {
      state.cancelling.add(oldest);
      deps.cancel([oldest], `cancelled by ${why}: a newer task of the key arrived`);
    }
  }
}

/** An admitted entry no claim asked about in this long is forgotten (it comes back if it was lost). */
export const ADMITTED_TTL_MS = 30_000;

/** A grant younger than this may not have reached the store yet: a reconcile keeps it. */
export const GRANT_GRACE_MS = 10_000;

/**
 * A task offered or asked about is due and pending to whoever sent it; if the key still counts
 * it a holder from a grant older than {@link GRANT_GRACE_MS}, its attempt may have ended
 * without a return reaching the key (its lease ran out on a node that died, and the task is
 * due again). Checked against the task table, so that the key neither drops it as a
 * duplicate — it would then wait in no memory — nor counts a permit nobody holds.
 */
export async function dropEndedHolders(
  state: LimitKeyState,
  entries: readonly DueEntry[],
  now: number,
  deps: LimitKeyDeps,
): Promise<void> {
  if (state.holders.size === 0 || !anyHolderOlder(state, now - GRANT_GRACE_MS)) return;
  const old: string[] = [];
  for (const entry of entries) {
    const since = state.holders.get(entry.taskId);
    if (since !== undefined && now - since > GRANT_GRACE_MS) old.push(entry.taskId);
  }
  if (old.length === 0) return;
  // A store that cannot answer must not cost the message: all count as running till a later check.
  const running = await deps.store.stillRunning(old).catch(() => new Set(old));
  for (const id of old) {
    if (running.has(id)) continue;
    state.holders.delete(id);
    state.cancelling.delete(id);
  }
}

/**
 * Whether any holder started before `beforeMs`. Mostly none has, and the key's floor says so
 * at once: every claim's ask goes through here, and W1L's non-binding key looked each of a
 * claim's 1 000 entries up among its 1 000 holders, none old (38 ms of a run's profile, issue 28).
 * Otherwise the holders are looked through, and the floor is the oldest of them again.
 */
function anyHolderOlder(state: LimitKeyState, beforeMs: number): boolean {
  if (state.holdersFloorMs >= beforeMs) return false;
  let floor = Number.POSITIVE_INFINITY;
  for (const since of state.holders.values()) if (since < floor) floor = since;
  state.holdersFloorMs = floor;
  return floor < beforeMs;
}

/**
 * Oldest first (a map keeps the order entries were admitted in), so it stops at the first
 * still young: every message pumps, and a window of 2 000 walked whole each time was 76 ms of
 * a W1L run's profile.
 */
export function expireAdmitted(state: LimitKeyState, now: number): void {
  for (const [id, since] of state.admitted) {
    if (now - since <= ADMITTED_TTL_MS) break;
    state.admitted.delete(id);
  }
}

/** Most tasks remembered as offered while held (a bound, not a working size: a few at a time). */
const OFFERED_WHILE_HELD_MAX = 10_000;

/**
 * Whether an offered (or read) task is one the key holds already: a holder, or admitted to a
 * ready queue. A holder offered again is remembered for {@link GRANT_GRACE_MS} (`remember`:
 * it was offered, not read): its attempt may have ended and the task come back due — a lease
 * that ran out, then fired by its wheel — while the permit's return is still on its way from
 * another node. The offer then came first, was dropped as a duplicate, and the return left the
 * task in no memory: 15 s until the safety net found it, in every run of the 3-node kill case.
 */
export function duplicateOf(state: LimitKeyState, entry: DueEntry, now: number, remember: boolean): boolean {
  if (state.admitted.has(entry.taskId)) return true;
  if (!state.holders.has(entry.taskId)) return false;
  if (remember) {
    const held = state.offeredWhileHeld;
    for (const [id, { atMs }] of held) {
      if (now - atMs <= GRANT_GRACE_MS && held.size < OFFERED_WHILE_HELD_MAX) break;
      held.delete(id);
    }
    held.delete(entry.taskId);
    held.set(entry.taskId, { entry, atMs: now });
  }
  return true;
}

/** The permits of `taskIds` came back: those offered meanwhile, to be taken in as offered now. */
export function offeredBack(state: LimitKeyState, taskIds: readonly string[], now: number): DueEntry[] {
  if (state.offeredWhileHeld.size === 0) return [];
  const back: DueEntry[] = [];
  for (const id of taskIds) {
    const held = state.offeredWhileHeld.get(id);
    if (held === undefined) continue;
    state.offeredWhileHeld.delete(id);
    if (now - held.atMs <= GRANT_GRACE_MS) back.push(held.entry);
  }
  return back;
}

/**
 * Tasks handed on by an activation of the key that ended (another node's, stale since the ring
 * moved the key here) waited in its memory, so they are in no ready queue — even one this
 * activation admitted, which a claim then took to the stale one, which refused it and parked
 * it. Counted as admitted still, it held the key's room until {@link ADMITTED_TTL_MS}: 30 s with
 * nothing running under a limit of 1, after a node paused past the failure timeout (issue 28's
 * 3-node test). They are taken in as any offered task now.
 */
export function readmit(state: LimitKeyState, entries: readonly DueEntry[]): void {
  for (const entry of entries) state.admitted.delete(entry.taskId);
}

/**
 * Drops the holders whose attempt is over though no return reached the key (a node died
 * between the end of a lease and its message): every `reconcileMs` while tasks wait.
 */
export async function reconcile(state: LimitKeyState, now: number, deps: LimitKeyDeps): Promise<void> {
  if (state.holders.size === 0 || now - state.lastReconcileMs < deps.reconcileMs) return;
  if (state.waiting.size === 0 && state.inbox.size === 0 && state.admitted.size === 0) return;
  state.lastReconcileMs = now;
  const old = [...state.holders].filter(([, since]) => now - since > GRANT_GRACE_MS).map(([taskId]) => taskId);
  if (old.length === 0) return;
  const running = await deps.store.stillRunning(old);
  for (const id of old) {
    if (!running.has(id)) {
      state.holders.delete(id);
      state.cancelling.delete(id);
    }
  }
}

/**
 * Whether the key takes large offers into its waiting set as they come: a key with an
 * `on_limit` strategy, which decides on each task as it arrives. A `queue` key leaves them in
 * its inbox and admits from there (decision 0042).
 */
export function eager(state: LimitKeyState): boolean {
  return state.limit !== null && state.limit.onLimit !== 'queue';
}

/**
 * The `room` most urgent tasks of a queue key, from its waiting set and its inbox merged (the
 * inbox first among equals). One taken from the inbox that the key holds already (admitted, or
 * a holder) is a duplicate and goes; a copy of it offered again meanwhile (the safety net
 * offers the oldest overdue tasks, which are the inbox's head) is dropped from the waiting set,
 * so that it is not admitted a second time once this one has run.
 */
export function takeMerged(state: LimitKeyState, room: number, now: number): DueEntry[] {
  const out: DueEntry[] = [];
  while (out.length < room) {
    const next = state.inbox.peek();
    const before = state.waiting.take(room - out.length, next);
    for (const entry of before) {
      state.admitted.set(entry.taskId, now);
      out.push(entry);
    }
    if (next === undefined || out.length >= room) break;
    for (const entry of state.inbox.take(room - out.length, state.waiting.peek())) {
      const id = entry.taskId;
      if (duplicateOf(state, entry, now, true)) continue;
      state.waiting.delete(id);
      state.admitted.set(id, now);
      out.push(entry);
    }
  }
  return out;
}
