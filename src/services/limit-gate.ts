import { LIMIT } from '../actors/limit-key.js';
import { compareUrgency } from '../actors/limit-waiting.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { DueEntry } from '../domain/model.js';
import type { ResolvedLimit } from '../domain/limits.js';
import type { LimitGrantRow } from '../store/limit-types.js';
import { OpenKeys } from './limit-open-keys.js';

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
  /** @default Date */
  clock?: { now(): number };
}

export { OPEN_TRUSTED_MS } from './limit-open-keys.js';

/** Gated entries a wheel fired, routed: pushed straight with the free ones, or offered to a key. */
export interface Routed {
  free: DueEntry[];
  straight: DueEntry[];
  /** To be offered to their home keys, by key. */
  offered: Map<string, DueEntry[]>;
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
  /** The keys that said they are open (fast admission). */
  private readonly open = new OpenKeys();
  private readonly clock: { now(): number };

  constructor(private readonly deps: LimitGateDeps) {
    this.clock = deps.clock ?? Date;
  }

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

  /**
   * Entries by home key, and those no key gates. A wheel's fire is mostly runs of entries
   * alike (a flood: one type, one limit), so the keys are looked up once per run, not once
   * per entry: at the top of the hour 200 000 entries of one key took 250 ms of the node's
   * loop here, twice (routed, then offered), while the quiet keys' submits waited (W6).
   */
  private byHome(entries: readonly DueEntry[]): { free: DueEntry[]; byHome: Map<string, DueEntry[]> } {
    const free: DueEntry[] = [];
    const byHome = new Map<string, DueEntry[]>();
    let lastType: string | null = null;
    let lastLimits: readonly string[] | undefined;
    let list: DueEntry[] | null = null; // the last entry's home list; null: not gated
    for (const entry of entries) {
      if (entry.taskType !== lastType || !sameNames(entry.limits, lastLimits)) {
        lastType = entry.taskType;
        lastLimits = entry.limits;
        const keys = this.keysOf(entry);
        if (keys.length === 0) list = null;
        else {
          const home = this.homeOf(keys);
          list = byHome.get(home) ?? null;
          if (list === null) byHome.set(home, (list = []));
        }
      }
      (list ?? free).push(entry);
    }
    return { free, byHome };
  }

  /** Splits entries into those no key gates and those some key does. */
  split(entries: readonly DueEntry[]): { free: DueEntry[]; gated: DueEntry[] } {
    const free: DueEntry[] = [];
    const gated: DueEntry[] = [];
    for (const entry of entries) (this.keysOf(entry).length === 0 ? free : gated).push(entry);
    return { free, gated };
  }

  /**
   * Routes a wheel's due entries: those no key gates are free; a gated one whose home key
   * said it is open (fast admission: nothing waits there, its `on_limit` is `queue`, it has
   * room) goes straight into the ready queue with them, as many as the key's room less those
   * this gate pushed straight since; the rest are offered to their home keys. Admission starts
   * nothing — every task still needs its keys' grants at its claim — so a key that turned
   * binding meanwhile only gets the extra ones back there, parked.
   */
  route(entries: readonly DueEntry[]): Routed {
    const { free, byHome } = this.byHome(entries);
    const out: Routed = { free, straight: [], offered: new Map() };
    if (byHome.size === 0) return out;
    const now = this.clock.now();
    for (const [key, list] of byHome) {
      const room = this.openRoom(key, now);
      if (room >= list.length) {
        this.open.pushed(key, list, now);
        append(out.straight, list);
        continue;
      }
      if (room > 0) {
        list.sort(compareUrgency);
        const straight = list.splice(0, room);
        this.open.pushed(key, straight, now);
        append(out.straight, straight);
      }
      out.offered.set(key, list);
    }
    return out;
  }

  /** Entries `route` sent straight that were not pushed after all (the push failed). */
  notPushed(entries: readonly DueEntry[]): void {
    for (const entry of entries) {
      const keys = this.keysOf(entry);
      if (keys.length > 0) this.open.notPushed(this.homeOf(keys), entry.taskId);
    }
  }

  /** How many more entries of `key` may go straight now (0: offer them). */
  private openRoom(key: string, now: number): number {
    const room = this.open.room(key, now);
    if (room <= 0) return 0;
    // The catalog here decides too: a strategy must see every arrival.
    const limit = this.deps.keys.resolve(key);
    return limit !== null && limit.onLimit !== 'queue' ? 0 : room;
  }

  /** How many keys this gate holds an answer of (tests, metrics). */
  get openKeys(): number {
    return this.open.size;
  }

  /**
   * Offers gated entries to their home keys, one message per key. A key that cannot be told
   * (a full mailbox) loses nothing: the partition's safety net offers the task again.
   * `handed`: the waiting tasks of a key's activation that ended, in no ready queue (`readmit`).
   */
  offer(entries: readonly DueEntry[], handed = false): void {
    this.offerByHome(this.byHome(entries).byHome, false, handed);
  }

  /**
   * {@link offer} of entries already grouped by home key (`Routed.offered`); `fired`: a wheel
   * fired them (each task once: a queue key keeps them unindexed, `LimitInbox.stage`).
   */
  offerByHome(byKey: ReadonlyMap<string, DueEntry[]>, fired = false, handed = false): void {
    for (const [key, list] of byKey) {
      try {
        this.deps.system.ref(LIMIT, key).tell({ type: 'offer', entries: list, fired, handed });
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
    const answers = new Map<string, Answer | null>();
    await Promise.all(
      [...byKey].map(async ([key, list]) => {
        try {
          const answer = await this.deps.system
            .ref(LIMIT, key)
            .ask({ type: 'grant', entries: list }, this.deps.askTimeoutMs);
          // Mostly every one asked about is granted: no set of them is built then.
          const all = answer.granted.length === list.length;
          answers.set(key, {
            epoch: answer.epoch,
            granted: all ? null : new Set(answer.granted),
            held: answer.held.length === 0 ? null : new Set(answer.held),
            atMs: answer.atMs,
          });
          this.open.answered(key, list, answer.openRoom, this.clock.now());
        } catch (error) {
          answers.set(key, null);
          this.open.answered(key, list, null, this.clock.now());
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
        else if (answer.held?.has(entry.taskId) === true) duplicate = true;
        else if (!grantedBy(answer, entry.taskId)) refused = true;
      }
      if (!refused && !silent && !duplicate) {
        out.claimable.push(entry);
        for (const key of keys) {
          const answer = answers.get(key)!;
          out.grants.push({ taskId: entry.taskId, key, epoch: answer.epoch });
          out.grantedAtMs = Math.max(out.grantedAtMs ?? answer.atMs, answer.atMs);
        }
        continue;
      }
      (duplicate ? out.duplicates : refused ? out.parked : out.unanswered).push(entry);
      for (const key of keys) {
        const answer = answers.get(key);
        if (answer && grantedBy(answer, entry.taskId)) {
          const list = unused.get(key);
          if (list) list.push(entry.taskId);
          else unused.set(key, [entry.taskId]);
        }
      }
    }
    for (const [key, taskIds] of unused) this.giveBack(key, taskIds);
    return out;
  }

  /** Asks keys whose grants a claim refused for tasks still pending to check they own themselves. */
  verify(keys: Iterable<string>): void {
    for (const key of keys) {
      try {
        this.deps.system.ref(LIMIT, key).tell({ type: 'verify' });
      } catch (error) {
        this.deps.onError(error, `asking limit ${key} to check its ownership`);
      }
    }
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

/** A key's answer to a claim's ask; `granted` null: every task asked about; `held` null: none. */
interface Answer {
  epoch: number;
  granted: Set<string> | null;
  held: Set<string> | null;
  atMs: number;
}

function grantedBy(answer: Answer, taskId: string): boolean {
  return answer.granted === null || answer.granted.has(taskId);
}

/** Whether two entries name the same limits (most often both none, or the same one). */
function sameNames(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `into.push(...from)` without spreading (a fire of 200 000 entries would pass the argument limit). */
function append<T>(into: T[], from: readonly T[]): void {
  for (const item of from) into.push(item);
}
