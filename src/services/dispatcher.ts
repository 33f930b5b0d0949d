import type { Cancel, Clock } from '../runtime/clock.js';
import type { LeaseBook } from '../actors/lease-book.js';
import type { ClaimedTask, DueEntry } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { TaskStore } from '../store/types.js';
import type { ReadyQueue } from '../store/fast-index-types.js';
import type { LimitGrantRow } from '../store/limit-types.js';
import type { LimitGate } from './limit-gate.js';
import type { Assignment, PollRequest } from './types.js';
import { tracingOn } from '../lib/otel.js';
import { traceClaims } from './task-spans.js';
import { PollClaims, type ClaimRequest, type ClaimShare } from './poll-claims.js';
import { trace, tracing } from '../lib/trace.js';

export type { ClaimRequest, ClaimShare };

/**
 * Hands due tasks to workers that ask for them (pull). A poll takes entries from the ready
 * queues, claims them in one compare-and-set statement, and starts a lease actor per claimed
 * task. When nothing is ready it waits until a push for one of its task types lands (or the
 * wait ends), so a long-poll answers as soon as a task is claimable.
 */
export interface DispatcherDeps {
  tasks: TaskStore;
  ready: ReadyQueue;
  clock: Clock;
  /** Where the leases of claimed tasks are kept. */
  leases: Pick<LeaseBook, 'granted'>;
  /** Upper bound of a poll's wait. */
  pollMaxWaitMs: number;
  /** The limits' gate: absent, nothing is gated (tests of the dispatcher alone). */
  gate?: Pick<LimitGate, 'admit' | 'giveBackGrants' | 'offer' | 'verify'>;
  events: NodeEventSink;
  onError?(error: unknown, context: string): void;
}

interface Waiter {
  readonly taskTypes: ReadonlySet<string>;
  /** The worker whose poll waits, and since when (Unix ms): the workers view lists them. */
  readonly workerId: string;
  readonly sinceMs: number;
  wake(): void;
}

/**
 * A waiting poll re-checks the queues at least this often, for pushes this node did not see
 * (another node's partition, entries put back by `requeueStale`).
 */
export const RECHECK_MS = 1_000;

/**
 * How far a ready entry's due time may be ahead of this node's clock and still be claimed, ms:
 * the bound on clock skew between nodes that the cluster tolerates.
 */
export const MAX_CLOCK_SKEW_MS = 1_000;

/** Most task types whose last ask a node remembers. */
export const ASKED_TYPES_MAX = 10_000;

/**
 * The time a batch is claimed at. An entry is in a ready queue because the wheel that owns its
 * partition found it due — on that node's clock, which may run a little ahead of this one's
 * (or be read an instant later: the push can land between this node reading its clock and
 * taking). The claim refuses a task whose due time is after the claim time, and a refused
 * entry is dropped, so claiming at this node's clock alone would lose such a task for good.
 * Claiming at the latest due time in the batch (at most `MAX_CLOCK_SKEW_MS` ahead) honours the
 * owner's decision, and still refuses a stale entry of a task that was moved to a later due
 * time (a retry's backoff).
 */
function claimTime(nowMs: number, entries: readonly { dueMs: number }[]): number {
  let latest = nowMs;
  for (const entry of entries) if (entry.dueMs > latest) latest = entry.dueMs;
  return Math.min(latest, nowMs + MAX_CLOCK_SKEW_MS);
}

export class Dispatcher {
  private readonly waiters = new Set<Waiter>();
  /** Entries waiting to be put back when due (see `claim`), cancelled at `stop`. */
  private readonly putBacks = new Set<Cancel>();
  /** Bumped on every push this node sees, so a poll that found nothing knows whether to look again. */
  private pushSeq = 0;
  /** When a worker last asked for each task type here (a poll or a channel claim), newest last. */
  private readonly asked = new Map<string, number>();
  /** Told of every push, after the waiting polls (the worker channel). */
  private readonly pushListeners = new Set<(taskTypes: ReadonlySet<string>) => void>();
  private readonly pollClaims = new PollClaims((types, shares, signal) => this.claimReadyFor(types, shares, signal));

  constructor(private readonly deps: DispatcherDeps) {}

  /** Cancels the entries waiting to be put back: they stay in flight, and `requeueStale` returns them. */
  stop(): void {
    for (const cancel of this.putBacks) cancel();
    this.putBacks.clear();
  }

  /** Calls `listener` on every push this node sees, with its task types. Returns a function that stops. */
  onPush(listener: (taskTypes: ReadonlySet<string>) => void): () => void {
    this.pushListeners.add(listener);
    return () => this.pushListeners.delete(listener);
  }

  /** Tells waiting polls (and the push listeners) that entries of these task types were pushed. */
  notify(taskTypes: ReadonlySet<string>): void {
    this.pushSeq++;
    for (const listener of this.pushListeners) listener(taskTypes);
    for (const waiter of this.waiters) {
      for (const type of waiter.taskTypes) {
        if (taskTypes.has(type)) {
          waiter.wake();
          break;
        }
      }
    }
  }

  /**
   * Who waits for `taskType` here: the long-polls waiting now, and when a worker last asked
   * for it (a poll or a claim of the worker channel; Unix ms, null: not since the start, or
   * forgotten among more than {@link ASKED_TYPES_MAX} types). For `explain`.
   */
  presence(taskType: string): { polling: number; lastAskedMs: number | null } {
    let polling = 0;
    for (const waiter of this.waiters) if (waiter.taskTypes.has(taskType)) polling++;
    return { polling, lastAskedMs: this.asked.get(taskType) ?? null };
  }

  /** The long-polls waiting here now: their worker, task types and since when (the workers view). */
  waitingPolls(): { workerId: string; taskTypes: string[]; sinceMs: number }[] {
    return [...this.waiters].map((w) => ({ workerId: w.workerId, taskTypes: [...w.taskTypes], sinceMs: w.sinceMs }));
  }

  private noteAsked(taskTypes: readonly string[], nowMs: number): void {
    for (const type of taskTypes) {
      this.asked.delete(type);
      this.asked.set(type, nowMs);
    }
    // Least recently asked first out: the map stays bounded however many types workers name.
    for (const type of this.asked.keys()) {
      if (this.asked.size <= ASKED_TYPES_MAX) break;
      this.asked.delete(type);
    }
  }

  async poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    const { clock } = this.deps;
    const startedMs = clock.now();
    const deadline = startedMs + Math.min(request.waitMs, this.deps.pollMaxWaitMs);
    const types = new Set(request.taskTypes);
    for (;;) {
      // A poll whose worker went away claims nothing more: what it claimed would wait out a
      // lease nobody holds.
      if (signal?.aborted) return [];
      const seq = this.pushSeq;
      const claimed = await this.claimReady(request, signal);
      if (claimed.length > 0) return claimed;
      const remaining = deadline - clock.now();
      if (remaining <= 0 || signal?.aborted) return [];
      if (seq !== this.pushSeq) continue; // something was pushed while we looked
      await this.waitForPush(types, Math.min(remaining, RECHECK_MS), signal, request.workerId, startedMs);
    }
  }

  /**
   * One attempt: take, claim, start leases, shared with the polls of the same task types that
   * look in the same turn (poll-claims.ts). Entries that were not claimable are dropped, but
   * for one case: an entry whose task is pending at exactly that due time, not yet due on
   * this clock — its wheel fired it on a clock further ahead than the claim tolerates. It is
   * the task's only entry, so it is put back in its queue when it falls due here (and stays
   * in flight until then, so `requeueStale` puts it back should this node die first).
   *
   * The step long-polls take; [] when nothing is ready.
   */
  claimReady(request: ClaimRequest, signal?: AbortSignal): Promise<Assignment[]> {
    return this.pollClaims.claim(request, signal);
  }

  /**
   * `claimReady` for several workers of the same task types at once (the worker channel's
   * sockets in one event-loop turn): one take of as many entries as they want together, one
   * claim statement whose rows each name their worker, dealt so that each share gets at most
   * its `maxTasks` and the entries are spread evenly over the shares. Answers the tasks of each
   * share, in the order of `shares`.
   */
  async claimReadyFor(
    taskTypes: string[],
    shares: readonly ClaimShare[],
    signal?: AbortSignal,
  ): Promise<Assignment[][]> {
    const { tasks, ready, clock, leases } = this.deps;
    this.noteAsked(taskTypes, clock.now());
    const out: Assignment[][] = shares.map(() => []);
    let wanted = 0;
    for (const share of shares) wanted += share.maxTasks;
    if (wanted <= 0) return out;
    for (;;) {
      const takeAt = tracing ? Date.now() : 0;
      const entries = await ready.take(taskTypes, wanted, clock.now());
      if (entries.length === 0) return out;
      const admitAt = tracing ? Date.now() : 0;
      if (signal?.aborted) {
        await this.putBack(entries);
        return out;
      }
      // Entries that limits gate go past their keys first (docs/decisions/0023-flow-control.md).
      let claimable = entries;
      let grants: LimitGrantRow[] = [];
      let startMs = clock.now();
      if (this.deps.gate) {
        const admission = await this.deps.gate.admit(entries);
        claimable = admission.claimable;
        grants = admission.grants;
        // A gated task starts when its keys granted it (their rate counted that instant), not
        // after the answer's way back, which a loaded node or a hop between nodes stretches.
        startMs = admission.grantedAtMs ?? clock.now();
        // Parked: the key that refused them keeps them. Unanswered: back in their queue.
        if (admission.unanswered.length > 0) await this.putBack(admission.unanswered);
        const dropped = [...admission.parked, ...admission.duplicates];
        if (dropped.length > 0)
          ready
            .ack(dropped)
            .catch((error: unknown) => this.deps.onError?.(error, 'ack of entries parked with their limit'));
        if (claimable.length === 0) {
          if (admission.unanswered.length > 0) return out;
          continue;
        }
      }
      const claimAt = tracing ? Date.now() : 0;
      const now = claimTime(startMs, claimable);
      const owners = deal(claimable.length, shares);
      const ids = new Array<string>(claimable.length);
      const workerIds = new Array<string>(claimable.length);
      for (let i = 0; i < claimable.length; i++) {
        ids[i] = (claimable[i] as DueEntry).taskId;
        workerIds[i] = (shares[owners[i] as number] as ClaimShare).workerId;
      }
      let claimed;
      try {
        claimed =
          shares.length === 1
            ? await tasks.claim(ids, (shares[0] as ClaimShare).workerId, now, grants)
            : await tasks.claimForWorkers(ids, workerIds, now, grants);
      } catch (error) {
        // Put the entries back at once; if that fails too, they stay in flight and
        // `requeueStale` returns them later. Either way the tasks are still `pending`.
        this.deps.gate?.giveBackGrants(grants);
        await this.putBack(claimable);
        throw error;
      }
      if (tracing)
        trace('claim', {
          n: entries.length,
          takeMs: admitAt - takeAt,
          admitMs: claimAt - admitAt,
          claimMs: Date.now() - claimAt,
        });
      const early = claimed.length < claimable.length ? await this.notYetDue(claimable, claimed, now) : [];
      if (grants.length > 0 && claimed.length < claimable.length)
        await this.unusedGrants(grants, claimable, claimed, early, now);
      // The claim is settled in Postgres; dropping the in-flight entries is housekeeping and
      // stays off the worker's critical path. If it fails, `requeueStale` puts them back
      // later and their claim is refused by the compare-and-set: nothing runs twice.
      const settled = early.length === 0 ? claimable : claimable.filter((e) => !early.includes(e));
      ready.ack(settled).catch((error: unknown) => this.deps.onError?.(error, 'ack of claimed ready entries'));
      for (const entry of early) this.pushWhenDue(entry);
      if (claimed.length === 0) continue; // stale entries (cancelled, already claimed): look again
      if (shares.length === 1) out[0] = claimed;
      else {
        const ownerOf = new Map<string, number>();
        for (let i = 0; i < ids.length; i++) ownerOf.set(ids[i] as string, owners[i] as number);
        for (const task of claimed) (out[ownerOf.get(task.id) as number] as Assignment[]).push(task);
      }
      if (tracingOn()) for (let i = 0; i < shares.length; i++) traceClaims(out[i]!, shares[i]!.workerId, startMs);
      for (let i = 0; i < shares.length; i++) {
        const mine = out[i] as Assignment[];
        if (mine.length > 0)
          this.deps.events.emit('task:claimed', {
            workerId: (shares[i] as ClaimShare).workerId,
            taskIds: mine.map((t) => t.id),
            tasks: mine,
            startedMs: now,
          });
      }
      // The lease lives here, where its worker asked, passive until it has work (see `LeaseBook`).
      for (const task of claimed) leases.granted(task.id, task.version, task.leaseExpiresMs);
      return out;
    }
  }

  /**
   * Grants of tasks the claim did not start go back to their keys; a task still pending at its
   * entry's due time (its key's epoch changed under the grant: a new activation) is offered to
   * its home key again, which parks or admits it — it must not be dropped.
   */
  private async unusedGrants(
    grants: readonly LimitGrantRow[],
    claimable: readonly DueEntry[],
    claimed: readonly ClaimedTask[],
    early: readonly DueEntry[],
    claimMs: number,
  ): Promise<void> {
    const gate = this.deps.gate;
    if (!gate) return;
    const started = new Set(claimed.map((t) => t.id));
    const unused = grants.filter((g) => !started.has(g.taskId));
    gate.giveBackGrants(unused);
    const refusedIds = new Set(unused.map((g) => g.taskId));
    const candidates = [...refusedIds].filter((id) => !early.some((e) => e.taskId === id));
    if (candidates.length === 0) return;
    const pending = await this.deps.tasks.pendingDueTimes(candidates);
    const entries = claimable.filter(
      (e) => refusedIds.has(e.taskId) && e.dueMs <= claimMs && pending.get(e.taskId) === e.dueMs,
    );
    if (entries.length === 0) return;
    // Granted and still pending: most likely fenced (the key's epoch moved under its grants).
    // A stale activation would grant them again and again: each key checks it still owns itself.
    const ids = new Set(entries.map((e) => e.taskId));
    gate.verify(new Set(unused.filter((g) => ids.has(g.taskId)).map((g) => g.key)));
    gate.offer(entries);
  }

  /** Entries the claim refused whose task is pending at exactly their due time, after `claimMs`. */
  private async notYetDue(entries: DueEntry[], claimed: ClaimedTask[], claimMs: number): Promise<DueEntry[]> {
    const claimedIds = new Set(claimed.map((t) => t.id));
    const refused = entries.filter((e) => !claimedIds.has(e.taskId) && e.dueMs > claimMs);
    if (refused.length === 0) return [];
    const pending = await this.deps.tasks.pendingDueTimes(refused.map((e) => e.taskId));
    return refused.filter((e) => pending.get(e.taskId) === e.dueMs);
  }

  /** Puts an entry back in its queue once it is due on this clock, then drops it from flight. */
  private pushWhenDue(entry: DueEntry): void {
    const { ready, clock } = this.deps;
    const cancel = clock.setTimer(entry.dueMs - clock.now(), () => {
      this.putBacks.delete(cancel);
      ready
        .push([entry])
        .then(() => ready.ack([entry]))
        .catch((error: unknown) => this.deps.onError?.(error, `putting back an entry not yet due (requeueStale will)`));
    });
    this.putBacks.add(cancel);
  }

  /** Back to their queues at once; if that fails they stay in flight, for `requeueStale`. */
  private async putBack(entries: DueEntry[]): Promise<void> {
    const { ready } = this.deps;
    await ready
      .push(entries)
      .then(() => ready.ack(entries))
      .catch(() => undefined);
  }

  private waitForPush(
    taskTypes: ReadonlySet<string>,
    waitMs: number,
    signal: AbortSignal | undefined,
    workerId: string,
    sinceMs: number,
  ): Promise<void> {
    return new Promise((resolve) => {
      const finish = (): void => {
        this.waiters.delete(waiter);
        cancelTimer();
        signal?.removeEventListener('abort', finish);
        resolve();
      };
      const waiter: Waiter = { taskTypes, workerId, sinceMs, wake: finish };
      const cancelTimer = this.deps.clock.setTimer(waitMs, finish);
      signal?.addEventListener('abort', finish, { once: true });
      this.waiters.add(waiter);
    });
  }
}

/**
 * The share each of `n` entries goes to: every share at most its `maxTasks`, the entries
 * spread as evenly as those allow (a round over the shares not yet full, one entry each),
 * in contiguous runs. `n` is at most the sum of the `maxTasks`.
 */
export function deal(n: number, shares: readonly ClaimShare[]): number[] {
  const counts = shares.map(() => 0);
  let open = shares.map((_, i) => i).filter((i) => (shares[i] as ClaimShare).maxTasks > 0);
  let left = n;
  while (left > 0 && open.length > 0) {
    // Each open share gets an equal part of what is left, or what it still wants if less.
    const part = Math.max(1, Math.floor(left / open.length));
    for (const i of open) {
      if (left === 0) break;
      const give = Math.min(part, (shares[i] as ClaimShare).maxTasks - (counts[i] as number), left);
      counts[i] = (counts[i] as number) + give;
      left -= give;
    }
    open = open.filter((i) => (counts[i] as number) < (shares[i] as ClaimShare).maxTasks);
  }
  const owners = new Array<number>(n - left);
  let at = 0;
  for (let i = 0; i < counts.length; i++) for (let k = 0; k < (counts[i] as number); k++) owners[at++] = i;
  return owners;
}
