import { LIMIT } from '../actors/limit-key.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { DueEntry } from '../domain/model.js';
import type { ResolvedLimit } from '../domain/limits.js';
import type { LimitGrantRow } from '../store/limit-types.js';

/** What the gate asks of the node's catalog of declarations. */
export interface LimitKeys {
  /** The keys of a task that resolve to a declaration (its named limits and `type:<t>`); [] mostly. */
  gatedKeys(taskType: string, limits: readonly string[] | undefined): readonly string[];
  resolve(key: string): ResolvedLimit | null;
}

export interface LimitGateDeps {
  keys: LimitKeys;
  system: ActorSystemApi;
  /** How long a claim waits for a key's answer. */
  askTimeoutMs: number;
  onError(error: unknown, context: string): void;
}

/** A claim's entries after the keys answered. */
export interface Admission {
  /** May be claimed now: the entries no key gates, and those every key granted. */
  claimable: DueEntry[];
  /** The grants the claim must carry (fenced by the keys' epochs). */
  grants: LimitGrantRow[];
  /** Refused by a key, which keeps them: they leave the ready queue. */
  parked: DueEntry[];
  /** No answer from a key: back to the ready queue. */
  unanswered: DueEntry[];
  /** Duplicates of tasks that hold a permit (running, or being claimed): dropped. */
  duplicates: DueEntry[];
  /**
   * The latest instant a key granted one of `claimable` (its clock): the start its rate
   * counted, which the claim records as the tasks' start. null: nothing granted.
   */
  grantedAtMs: number | null;
}

/**
 * Between the fast index and the limit actors (docs/decisions/0023-flow-control.md). A due
 * entry none of whose keys is declared passes untouched — the case of nearly every task, at
 * the cost of a catalog lookup. A gated one is offered to its home key when a wheel fires
 * it, and granted by every one of its keys when a claim takes it.
 */
export class LimitGate {
  constructor(private readonly deps: LimitGateDeps) {}

  /**
   * The gated keys of an entry: every limit it names — a name was declared when the task was
   * submitted, so a node whose catalog has not read that declaration yet must not take the
   * task for ungated (its key's actor reads the declaration itself) — and its type's
   * `type:<t>` when the catalog has it.
   */
  keysOf(entry: Pick<DueEntry, 'taskType' | 'limits'>): readonly string[] {
    const named = entry.limits;
    const typeKeys = this.deps.keys.gatedKeys(entry.taskType, undefined);
    if (named === undefined || named.length === 0) return typeKeys;
    if (typeKeys.length === 0) return named;
    return [...named, ...typeKeys].sort();
  }

  /**
   * The key that admits an entry into the ready queue: its first key with a concurrency or a
   * rate (the one likely to bind), else its first.
   */
  homeOf(keys: readonly string[]): string {
    for (const key of keys) {
      const limit = this.deps.keys.resolve(key);
      if (limit && (limit.concurrency !== null || limit.rate !== null)) return key;
    }
    return keys[0] as string;
  }

  /** Splits entries into those no key gates and those some key does. */
  split(entries: readonly DueEntry[]): { free: DueEntry[]; gated: DueEntry[] } {
    const free: DueEntry[] = [];
    const gated: DueEntry[] = [];
    for (const entry of entries) (this.keysOf(entry).length === 0 ? free : gated).push(entry);
    return { free, gated };
  }

  /**
   * Offers gated entries to their home keys, one message per key. A key that cannot be told
   * (a full mailbox) loses nothing: the partition's safety net offers the task again.
   */
  offer(entries: readonly DueEntry[]): void {
    const byKey = new Map<string, DueEntry[]>();
    for (const entry of entries) {
      const keys = this.keysOf(entry);
      if (keys.length === 0) continue;
      const home = this.homeOf(keys);
      const list = byKey.get(home);
      if (list) list.push(entry);
      else byKey.set(home, [entry]);
    }
    for (const [key, list] of byKey) {
      try {
        this.deps.system.ref(LIMIT, key).tell({ type: 'offer', entries: list });
      } catch (error) {
        this.deps.onError(error, `offering ${list.length} tasks to limit ${key} (the safety net offers them again)`);
      }
    }
  }

  /**
   * Asks every key of the gated entries, one message per key, which may start. An entry every
   * key granted is claimable; one a key refused is parked there, and the permits the others
   * granted it go back at once (nothing holds a permit while it waits for another: no key can
   * deadlock another, before or after a restart).
   */
  async admit(entries: readonly DueEntry[]): Promise<Admission> {
    const out: Admission = {
      claimable: [],
      grants: [],
      parked: [],
      unanswered: [],
      duplicates: [],
      grantedAtMs: null,
    };
    const keysOf = new Map<DueEntry, readonly string[]>();
    const byKey = new Map<string, DueEntry[]>();
    for (const entry of entries) {
      const keys = this.keysOf(entry);
      keysOf.set(entry, keys);
      if (keys.length === 0) out.claimable.push(entry);
      for (const key of keys) {
        const list = byKey.get(key);
        if (list) list.push(entry);
        else byKey.set(key, [entry]);
      }
    }
    if (byKey.size === 0) return out;
    const answers = new Map<string, { epoch: number; granted: Set<string>; held: Set<string>; atMs: number } | null>();
    await Promise.all(
      [...byKey].map(async ([key, list]) => {
        try {
          const answer = await this.deps.system
            .ref(LIMIT, key)
            .ask({ type: 'grant', entries: list }, this.deps.askTimeoutMs);
          answers.set(key, {
            epoch: answer.epoch,
            granted: new Set(answer.granted),
            held: new Set(answer.held),
            atMs: answer.atMs,
          });
        } catch (error) {
          answers.set(key, null);
          this.deps.onError(error, `asking limit ${key} for ${list.length} permits`);
        }
      }),
    );
    const unused = new Map<string, string[]>();
    for (const [entry, keys] of keysOf) {
      if (keys.length === 0) continue;
      let refused = false;
      let silent = false;
      let duplicate = false;
      for (const key of keys) {
        const answer = answers.get(key);
        if (!answer) silent = true;
        else if (answer.held.has(entry.taskId)) duplicate = true;
        else if (!answer.granted.has(entry.taskId)) refused = true;
      }
      if (!refused && !silent && !duplicate) {
        out.claimable.push(entry);
        for (const key of keys) {
          const answer = answers.get(key)!;
          out.grants.push({ taskId: entry.taskId, key, epoch: answer.epoch });
          if (out.grantedAtMs === null || answer.atMs > out.grantedAtMs) out.grantedAtMs = answer.atMs;
        }
        continue;
      }
      (duplicate ? out.duplicates : refused ? out.parked : out.unanswered).push(entry);
      for (const key of keys) {
        if (answers.get(key)?.granted.has(entry.taskId)) {
          const list = unused.get(key);
          if (list) list.push(entry.taskId);
          else unused.set(key, [entry.taskId]);
        }
      }
    }
    for (const [key, taskIds] of unused) this.giveBack(key, taskIds);
    return out;
  }

  /** Permits back to one key: attempts that ended, or grants no claim used. */
  giveBack(key: string, taskIds: string[]): void {
    if (taskIds.length === 0) return;
    try {
      this.deps.system.ref(LIMIT, key).tell({ type: 'returned', taskIds });
    } catch (error) {
      this.deps.onError(error, `returning ${taskIds.length} permits to limit ${key} (its reconcile will)`);
    }
  }

  /** Permits back for the grants of tasks a claim did not start. */
  giveBackGrants(grants: readonly LimitGrantRow[]): void {
    const byKey = new Map<string, string[]>();
    for (const g of grants) {
      const list = byKey.get(g.key);
      if (list) list.push(g.taskId);
      else byKey.set(g.key, [g.taskId]);
    }
    for (const [key, ids] of byKey) this.giveBack(key, ids);
  }
}
