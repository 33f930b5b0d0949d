/**
 * Flow control's vocabulary (API.md "Flow control", docs/decisions/0023-flow-control.md):
 * limit names and families, what a declaration holds, and the rate algorithm (GCRA). Pure:
 * no I/O, no imports of the stores, the actors or the services.
 */

/** What a key does when its concurrency is reached. */
export type OnLimit = 'queue' | 'cancel_running' | 'cancel_new' | 'keep_latest_waiting';

export const ON_LIMIT: readonly OnLimit[] = ['queue', 'cancel_running', 'cancel_new', 'keep_latest_waiting'];

/** Starts per period (GCRA): `limit` per `periodMs`, `burst` more allowed at once. */
export interface RateSpec {
  limit: number;
  periodMs: number;
  burst: number;
}

/** What an operator declares for a limit name (an exact key or a family). */
export interface LimitSpec {
  /** Tasks of the key running at once; null: unlimited; 0: paused. */
  concurrency: number | null;
  rate: RateSpec | null;
  onLimit: OnLimit;
  /** The key's share when keys of one family compete (> 0). */
  weight: number;
}

/** A declaration as stored. */
export interface LimitDeclaration extends LimitSpec {
  name: string;
  createdMs: number;
  updatedMs: number;
}

/** A key's values as its actor applies them: declared exactly, or by its family. */
export interface ResolvedLimit extends LimitSpec {
  key: string;
  /** The name whose declaration applies: the key itself or its family (`customer:*`). */
  declaredAs: string;
  /**
   * The most specific declared family that covers the key, whether or not its declaration is
   * the one that applies (a key declared exactly overrides its family's values, not its
   * membership): the keys it shares workers with by `weight`. null: none — the key competes
   * with no other for a share, and takes no admission window (decision 0051).
   */
  family: string | null;
}

/** Most limit names one task may take part in (its type's `type:<t>` not counted). */
export const MAX_LIMITS_PER_TASK = 8;
/** Longest limit name. */
export const MAX_LIMIT_NAME_LENGTH = 200;
/** Bounds of the declared values: a larger value is a 400, not a key nobody can reach. */
export const MAX_CONCURRENCY = 1_000_000;
export const MAX_RATE_LIMIT = 1_000_000;
export const MAX_RATE_PERIOD_SECONDS = 86_400;
export const MAX_RATE_BURST = 1_000_000;
export const MAX_WEIGHT = 1_000_000;
export const MIN_WEIGHT = 1e-6;

/** The prefix of the limit every task type is: `type:email.send`. */
export const TYPE_LIMIT_PREFIX = 'type:';

const NAME = /^[A-Za-z0-9_.:*-]{1,200}$/;

/**
 * A valid limit name: 1–200 of `[A-Za-z0-9_.:*-]`, with `*` only as the last character of a
 * family (`customer:*`).
 */
export function isLimitName(name: string): boolean {
  if (!NAME.test(name)) return false;
  const star = name.indexOf('*');
  return star === -1 || (isFamily(name) && star === name.length - 1);
}

/** A family: a name ending in `:*`. */
export function isFamily(name: string): boolean {
  return name.length > 2 && name.endsWith(':*') && name.indexOf('*') === name.length - 1;
}

/** The limit a task type is. */
export function typeLimit(taskType: string): string {
  return `${TYPE_LIMIT_PREFIX}${taskType}`;
}

/**
 * The families that could cover `key`, most specific first: `a:b:c` → `a:b:*`, `a:*`. A
 * family never covers itself, and a key with no `:` has none.
 */
export function familiesOf(key: string): string[] {
  if (isFamily(key)) return [];
  const out: string[] = [];
  for (let at = key.lastIndexOf(':'); at > 0; at = key.lastIndexOf(':', at - 1)) out.push(`${key.slice(0, at)}:*`);
  return out;
}

/**
 * The declaration that applies to `key`: its own, else its most specific declared family's;
 * null when neither is declared (an unknown name, or a task type nobody limited).
 */
export function resolveLimit(key: string, declared: (name: string) => LimitSpec | undefined): ResolvedLimit | null {
  const own = declared(key);
  const families = familiesOf(key);
  if (own) return { ...pick(own), key, declaredAs: key, family: families.find((f) => declared(f)) ?? null };
  for (const family of families) {
    const spec = declared(family);
    if (spec) return { ...pick(spec), key, declaredAs: family, family };
  }
  return null;
}

function pick(spec: LimitSpec): LimitSpec {
  return { concurrency: spec.concurrency, rate: spec.rate, onLimit: spec.onLimit, weight: spec.weight };
}

/** Names sorted and without repeats, as a task stores them; null for none. */
export function normaliseLimits(names: readonly string[] | null | undefined): string[] | null {
  if (!names || names.length === 0) return null;
  // Mostly one name, or names given in order: a copy, without a Set made for each task.
  if (strictlyAscending(names)) return names.slice();
  return [...new Set(names)].sort();
}

/** Whether each name sorts after the one before it (so none repeats). */
function strictlyAscending(names: readonly string[]): boolean {
  for (let i = 1; i < names.length; i++) if ((names[i - 1] as string) >= (names[i] as string)) return false;
  return true;
}

/**
 * The generic cell rate algorithm: one start every `periodMs / limit`, with `burst` more
 * allowed at once. State is one number, the theoretical arrival time (TAT) of the next start.
 * A start at `nowMs` is allowed while `tat - burst·interval <= nowMs`; each start moves the TAT
 * one interval on from `max(tat, now)`. Nothing waits inside it: a caller that is refused asks
 * again at `nextAllowedMs`.
 */
export class Gcra {
  private tatMs = 0;

  constructor(private readonly rate: RateSpec) {}

  /** ms between two starts at the steady rate. */
  get intervalMs(): number {
    return this.rate.periodMs / this.rate.limit;
  }

  /** How many starts are allowed at `nowMs` (at most `max`), without taking them. */
  available(nowMs: number, max: number): number {
    const interval = this.intervalMs;
    const tat = Math.max(this.tatMs, nowMs);
    // Starts k = 0..n-1 are allowed while tat + k·interval - (burst+1)·interval <= now.
    const room = Math.floor((nowMs - tat) / interval + this.rate.burst + 1 + 1e-9);
    return Math.max(0, Math.min(max, room));
  }

  /** Takes `n` starts at `nowMs` (the caller checked `available`). */
  take(nowMs: number, n: number): void {
    if (n <= 0) return;
    this.tatMs = Math.max(this.tatMs, nowMs) + n * this.intervalMs;
  }

  /** Gives back `n` starts taken but not used (a claim the store refused). */
  refund(n: number, nowMs: number): void {
    if (n <= 0) return;
    this.tatMs = Math.max(nowMs, this.tatMs - n * this.intervalMs);
  }

  /** From when this pacing allows what a fresh one would (Unix ms; 0: always). */
  get forgottenAtMs(): number {
    return this.tatMs;
  }

  /** When the next start is allowed (Unix ms): now or later. */
  nextAllowedMs(nowMs: number): number {
    const at = this.tatMs - this.rate.burst * this.intervalMs;
    return Math.max(nowMs, Math.ceil(at));
  }
}

/**
 * A key's rate as the limit actor applies it: GCRA paces the starts, and a log of the starts
 * within the last period is the hard bound — in any window of one period, at most
 * `limit + burst` starts. The GCRA is given more burst than declared (a quarter of the
 * limit) so that a start the actor could not hand out on the instant (a claim's round trip, a
 * late timer) can be made up later in the same period instead of being lost — without it a
 * rate of 100/s with burst 0 served one start per round trip (~10/s across three nodes) — while
 * the log keeps every window within the declared bound.
 */
export class RateWindow {
  private readonly gcra: Gcra;
  /** Start times within the last period, oldest first. */
  private readonly log: number[] = [];
  private readonly cap: number;

  constructor(private readonly rate: RateSpec) {
    this.cap = rate.limit + rate.burst;
    const slack = Math.max(1, Math.ceil(rate.limit / 4));
    this.gcra = new Gcra({ ...rate, burst: rate.burst + slack });
  }

  /** How many starts are allowed at `nowMs` (at most `max`), without taking them. */
  available(nowMs: number, max: number): number {
    this.trim(nowMs);
    return Math.max(0, Math.min(this.gcra.available(nowMs, max), this.cap - this.log.length));
  }

  /** Takes one start at `nowMs` (the caller checked `available`). */
  take(nowMs: number): void {
    this.gcra.take(nowMs, 1);
    this.log.push(nowMs);
  }

  /** Starts within the last period. */
  startsInPeriod(nowMs: number): number {
    this.trim(nowMs);
    return this.log.length;
  }

  /** When the next start is allowed (Unix ms): now or later. */
  nextAllowedMs(nowMs: number): number {
    this.trim(nowMs);
    const byLog =
      this.log.length < this.cap ? nowMs : (this.log[this.log.length - this.cap] as number) + this.rate.periodMs + 1;
    return Math.max(this.gcra.nextAllowedMs(nowMs), byLog);
  }

  /** ms between two starts at the steady rate. */
  get intervalMs(): number {
    return this.gcra.intervalMs;
  }

  /**
   * From when this window allows exactly what a fresh one would (Unix ms): its pacing has
   * caught up and its last start has left the period. Before it, forgetting the window could
   * let the key start more than its rate allows; from it on, nothing is lost.
   */
  get forgottenAtMs(): number {
    const last = this.log.length === 0 ? 0 : (this.log[this.log.length - 1] as number) + this.rate.periodMs;
    return Math.max(this.gcra.forgottenAtMs, last);
  }

  private trim(nowMs: number): void {
    const since = nowMs - this.rate.periodMs;
    let drop = 0;
    while (drop < this.log.length && (this.log[drop] as number) <= since) drop++;
    if (drop > 0) this.log.splice(0, drop);
  }
}
