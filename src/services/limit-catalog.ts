import { FieldPath } from '../domain/field-path.js';
import { resolveLimit, typeLimit, type LimitDeclaration, type ResolvedLimit } from '../domain/limits.js';
import type { Clock } from '../runtime/clock.js';
import type { LimitStore } from '../store/limit-types.js';

/** How often, at most, the catalog asks the store whether the declarations changed, ms. */
export const CATALOG_REFRESH_MS = 1_000;

/**
 * Resolutions remembered between two changes of the catalog. Keys are unbounded in number
 * (`customer:<anything>`): past this many the memory starts again rather than growing.
 */
const MAX_RESOLVED = 50_000;

/** What a task without gated keys gets: one shared array, so the common path allocates nothing. */
const NONE: readonly string[] = Object.freeze([]);

export interface LimitCatalogDeps {
  store: Pick<LimitStore, 'catalog'>;
  clock: Clock;
  /** The least time between two reads of the store, ms, unless one is forced. @default 1000 */
  refreshMs?: number;
}

/**
 * The node's copy of every limit declaration (docs/decisions/0023-flow-control.md): what the
 * wheel, the dispatcher and submit validation ask on their hot paths without a round trip.
 * Loaded at start, then read again when the store's catalog version changed — at most once
 * per `refreshMs` from the node's loops, and at once after a change made through this node.
 * Another node's change shows here within that second; submit validation, which must not
 * refuse a name declared a moment ago elsewhere, reads the store once more before it refuses.
 */
export class LimitCatalog {
  private readonly store: Pick<LimitStore, 'catalog'>;
  private readonly clock: Clock;
  private readonly refreshMs: number;
  private declared = new Map<string, LimitDeclaration>();
  private version: string | null = null;
  private checkedMs = Number.NEGATIVE_INFINITY;
  private resolved = new Map<string, ResolvedLimit | null>();
  /** {@link typeKeys}' answers, by task type; emptied with `resolved`. */
  private byType = new Map<string, readonly string[]>();
  private reading: Promise<boolean> | null = null;
  private rereading: Promise<boolean> | null = null;
  private readonly listeners = new Set<() => void>();

  constructor(deps: LimitCatalogDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.refreshMs = deps.refreshMs ?? CATALOG_REFRESH_MS;
  }

  /** Loads the declarations; the node calls it before it takes requests. */
  async start(): Promise<void> {
    await this.refresh(true);
  }

  /**
   * Reads the store's catalog when `refreshMs` passed since the last read, or at once with
   * `force` (after a local PUT or DELETE). Resolves true when the declarations changed.
   * One read at a time: a forced refresh while a read is under way (which may have begun
   * before the change the caller made) reads once more after it.
   */
  refresh(force = false): Promise<boolean> {
    if (this.reading === null) {
      if (!force && this.clock.now() - this.checkedMs < this.refreshMs) return Promise.resolve(false);
      return this.startRead();
    }
    if (!force) return this.reading;
    this.rereading ??= this.reading
      .catch(() => false)
      .then(() => {
        this.rereading = null;
        return this.reading ?? this.startRead();
      });
    return this.rereading;
  }

  /** Called after the declarations changed (the actors re-resolve their keys). Returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How many declarations the node knows. */
  get size(): number {
    return this.declared.size;
  }

  /** The declaration that applies to `key` (its own or its family's); null: none. */
  resolve(key: string): ResolvedLimit | null {
    if (this.declared.size === 0) return null;
    const memo = this.resolved.get(key);
    if (memo !== undefined) return memo;
    const limit = resolveLimit(key, (name) => this.declared.get(name));
    if (this.resolved.size >= MAX_RESOLVED) this.resolved.clear();
    this.resolved.set(key, limit);
    return limit;
  }

  /** Whether tasks of `key` meet its actor: it resolves to a declaration. */
  isGated(key: string): boolean {
    return this.resolve(key) !== null;
  }

  /**
   * The keys of a task that are gated: among the limits it names and its type's, sorted. A
   * shared empty array when none is (always while nothing is declared): such a task never
   * meets an actor.
   */
  gatedKeys(taskType: string, limits: readonly string[] | null | undefined): readonly string[] {
    if (this.declared.size === 0) return NONE;
    const typeKeys = this.typeKeys(taskType);
    // The usual limited task: its named limits (sorted, no repeats) all gated, its type not.
    if (limits && typeKeys.length === 0 && limits.every((key) => this.isGated(key))) return limits;
    let gated: string[] | null = typeKeys.length === 0 ? null : [...typeKeys];
    if (limits)
      for (const key of limits)
        if (this.isGated(key)) {
          gated ??= [];
          gated.push(key);
        }
    if (gated === null) return NONE;
    if (gated.length > 1) gated.sort();
    return gated;
  }

  /** `[type:<taskType>]` when that key is gated, else none; one answer per type until the declarations change. */
  private typeKeys(taskType: string): readonly string[] {
    let keys = this.byType.get(taskType);
    if (keys === undefined) {
      const type = typeLimit(taskType);
      keys = this.isGated(type) ? Object.freeze([type]) : NONE;
      if (this.byType.size >= MAX_RESOLVED) this.byType.clear();
      this.byType.set(taskType, keys);
    }
    return keys;
  }

  /** Whether a task may name `name` on submit: declared exactly, or covered by a declared family. */
  known(name: string): boolean {
    return this.resolve(name) !== null;
  }

  /**
   * The first of `names` that is neither declared nor covered by a family, or null when all
   * are known. On a miss it reads the store once before answering, so that a name another
   * node declared a moment ago is not refused.
   */
  async firstUnknown(names: readonly string[]): Promise<string | null> {
    const missing = names.find((name) => !this.known(name));
    if (missing === undefined) return null;
    await this.refresh(true);
    return names.find((name) => !this.known(name)) ?? null;
  }

  private startRead(): Promise<boolean> {
    const read = this.read().finally(() => {
      if (this.reading === read) this.reading = null;
    });
    this.reading = read;
    return read;
  }

  private async read(): Promise<boolean> {
    const { version, declarations } = await this.store.catalog(this.version);
    this.checkedMs = this.clock.now();
    if (declarations === null) return false;
    this.version = version;
    this.declared = new Map(declarations.map((d) => [d.name, d]));
    this.resolved = new Map();
    this.byType = new Map();
    for (const listener of this.listeners) listener();
    return true;
  }
}

/**
 * Refuses a submission naming a limit that is neither declared nor covered by a declared
 * family: 400 `unknown_limit` naming it, and the task (`tasks[3].limits`, `details.index`)
 * when the request holds several. All or nothing, as the rest of a batch's validation. The
 * catalog answers from memory; only on a miss does it read the store, once per request.
 */
/** Most distinct limit names one request (a batch, a graph) may name. */
export const MAX_LIMIT_NAMES_PER_REQUEST = 1_000;

export async function assertKnownLimits(
  catalog: Pick<LimitCatalog, 'firstUnknown'>,
  specs: readonly { limits: readonly string[] | null }[],
  batch: boolean,
): Promise<void> {
  const names = new Set<string>();
  for (const spec of specs) if (spec.limits) for (const name of spec.limits) names.add(name);
  if (names.size === 0) return;
  if (names.size > MAX_LIMIT_NAMES_PER_REQUEST)
    new FieldPath(batch ? 'tasks' : 'limits').fail(
      `name ${names.size} distinct limits; one request may name at most ${MAX_LIMIT_NAMES_PER_REQUEST}`,
    );
  const unknown = await catalog.firstUnknown([...names]);
  if (unknown === null) return;
  const index = specs.findIndex((spec) => spec.limits?.includes(unknown) === true);
  const at = batch ? new FieldPath(`tasks[${index}]`, index).at('limits') : new FieldPath('limits');
  at.fail(
    `"${unknown}" is neither declared nor covered by a declared family (declare it with PUT /api/limits/${unknown})`,
    'unknown_limit',
    { limit: unknown },
  );
}
