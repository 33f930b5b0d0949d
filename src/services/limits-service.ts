import {
  familiesOf,
  isFamily,
  resolveLimit,
  typeLimit,
  type LimitDeclaration,
  type LimitSpec,
  type ResolvedLimit,
} from '../domain/limits.js';
import { WheelhouseError } from '../lib/errors.js';
import type { Clock } from '../runtime/clock.js';
import type { LimitStore } from '../store/limit-types.js';
import { DEFAULT_LIMIT_SPEC, checkLimitName, isDefaultSpec, limitSpecOf, type LimitInput } from './limit-input.js';

/**
 * What the limit routes call (API.md "Flow control"): declare, read, list and remove limits,
 * and pause or resume a task type (its `type:<t>` key at concurrency 0). The declarations are
 * the store's; after a change made here the node's catalog is reloaded at once (other nodes
 * see it at their next reload, within a second) and `onChanged` tells whoever applies the key
 * (its actor) to look again. The live figures a read shows come from a `LimitLive`.
 */

/** A key's live figures: its tasks running and waiting, and the starts its rate counted. */
export interface LiveFigures {
  running: number;
  waiting: number;
  /** Starts within the rate's last period; null when nobody counts them (no actor, no rate). */
  startsLastPeriod: number | null;
}

/** Where the live figures of a key come from. */
export interface LimitLive {
  /** The figures of `key` (an exact key, never a family); null when they cannot be known. */
  inspect(key: string): Promise<LiveFigures | null>;
}

/**
 * The live figures read from the task table (`LimitStore.counts`): running and waiting are
 * exact as of the read; starts within the period are counted only by the key's actor, so null.
 */
export function storeLive(store: Pick<LimitStore, 'counts'>, clock: Clock): LimitLive {
  return {
    async inspect(key) {
      const { running, waiting } = await store.counts(key, clock.now());
      return { running, waiting, startsLastPeriod: null };
    },
  };
}

/** A limit as a read answers it: its resolved values, and its live figures (null for a family). */
export interface LimitView extends Omit<ResolvedLimit, 'family'> {
  running: number | null;
  waiting: number | null;
  startsLastPeriod: number | null;
}

export interface LimitViewPage {
  items: LimitView[];
  nextToken: string | null;
}

/** What pausing or resuming a task type answers. */
export interface TaskTypePause {
  taskType: string;
  /** Whether its key now resolves to concurrency 0 (a `type:*` family at 0 keeps it paused). */
  paused: boolean;
  /** The values its key now resolves to; null when nothing is declared for it. */
  limit: LimitView | null;
}

export interface LimitsApi {
  /** Declares or changes `name`; answers it as `get` would. */
  declare(name: string, input: LimitInput): Promise<LimitView>;
  /** `name` as declared, or as its family declares it; 404 `not_found` when neither is. */
  get(name: string): Promise<LimitView>;
  /** Declarations in name order, after the page `nextToken` ends. */
  list(query: { prefix?: string; limit: number; nextToken?: string }): Promise<LimitViewPage>;
  /** Removes a declaration: 404 when there is none, 409 `limit_in_use` while waiting tasks take part in it. */
  remove(name: string): Promise<void>;
  pauseType(taskType: string): Promise<TaskTypePause>;
  resumeType(taskType: string): Promise<TaskTypePause>;
}

export interface LimitsServiceDeps {
  store: LimitStore;
  clock: Clock;
  /** The node's catalog of declarations, reloaded at once (`force`) after each change made here. */
  catalog: { refresh(force?: boolean): Promise<unknown> };
  /** @default the task table's counts (`storeLive`) */
  live?: LimitLive;
  /** Told after each change made here, with the name changed. @default nothing */
  onChanged?: (name: string) => void;
}

export class LimitsService implements LimitsApi {
  private readonly live: LimitLive;
  private readonly onChanged: (name: string) => void;

  constructor(private readonly deps: LimitsServiceDeps) {
    this.live = deps.live ?? storeLive(deps.store, deps.clock);
    this.onChanged = deps.onChanged ?? (() => undefined);
  }

  async declare(name: string, input: LimitInput): Promise<LimitView> {
    checkLimitName(name);
    const spec = limitSpecOf(input);
    const stored = await this.deps.store.put(name, spec, this.deps.clock.now());
    await this.changed(name);
    return this.view(resolved(stored, name));
  }

  async get(name: string): Promise<LimitView> {
    checkLimitName(name);
    const found = await this.resolve(name);
    if (found === null) throw notDeclared(name);
    return this.view(found);
  }

  async list(query: { prefix?: string; limit: number; nextToken?: string }): Promise<LimitViewPage> {
    const after = query.nextToken === undefined ? undefined : nameOfToken(query.nextToken);
    const page = await this.deps.store.list({
      limit: query.limit,
      ...(query.prefix === undefined ? {} : { prefix: query.prefix }),
      ...(after === undefined ? {} : { after }),
    });
    // A page shows the declarations, not their live figures: one count per item would make a
    // page of busy keys as slow as that many reads (GET of one name has them).
    return {
      items: page.items.map((d) => ({ ...resolved(d, d.name), running: null, waiting: null, startsLastPeriod: null })),
      nextToken: page.next === null ? null : tokenOfName(page.next),
    };
  }

  async remove(name: string): Promise<void> {
    checkLimitName(name);
    if ((await this.deps.store.get(name)) === null) throw notDeclared(name);
    // Checked, then removed: a task submitted naming the key in between waits on a key that
    // is no longer declared, which gates nothing: it runs as if it named none.
    if (await this.deps.store.inUse(name)) {
      throw new WheelhouseError(
        'limit_in_use',
        `Tasks waiting to start take part in ${name}: cancel them, or let them start, before removing it ` +
          '(or set concurrency to null to lift the limit).',
        { details: { name } },
      );
    }
    await this.deps.store.remove(name);
    await this.changed(name);
  }

  /** The task type's key at concurrency 0, its other values kept: running tasks finish, none start. */
  async pauseType(taskType: string): Promise<TaskTypePause> {
    const key = checkLimitName(typeLimit(taskType));
    const own = await this.deps.store.get(key);
    const spec: LimitSpec = { ...(own === null ? DEFAULT_LIMIT_SPEC : specOf(own)), concurrency: 0 };
    await this.deps.store.put(key, spec, this.deps.clock.now());
    await this.changed(key);
    return this.typePause(taskType, key);
  }

  /**
   * The task type's key without a concurrency (API.md: "removing it"); a declaration left with
   * nothing else in it is removed, so a type that was only paused is ungated again. A
   * concurrency declared before the pause is not restored.
   */
  async resumeType(taskType: string): Promise<TaskTypePause> {
    const key = checkLimitName(typeLimit(taskType));
    const own = await this.deps.store.get(key);
    if (own !== null) {
      const spec: LimitSpec = { ...specOf(own), concurrency: null };
      // Removed even with tasks waiting (DELETE would refuse): they are what resuming is for,
      // and `onChanged` tells the key's actor to let them go.
      if (isDefaultSpec(spec)) await this.deps.store.remove(key);
      else await this.deps.store.put(key, spec, this.deps.clock.now());
      await this.changed(key);
    }
    return this.typePause(taskType, key);
  }

  private async typePause(taskType: string, key: string): Promise<TaskTypePause> {
    const found = await this.resolve(key);
    const limit = found === null ? null : await this.view(found);
    return { taskType, paused: limit?.concurrency === 0, limit };
  }

  /** `name`'s own declaration, else its most specific declared family's, read from the store. */
  private async resolve(name: string): Promise<ResolvedLimit | null> {
    const declared = new Map<string, LimitDeclaration>();
    for (const candidate of [name, ...familiesOf(name)]) {
      const found = await this.deps.store.get(candidate);
      if (found !== null) {
        declared.set(candidate, found);
        break;
      }
    }
    return resolveLimit(name, (n) => declared.get(n));
  }

  private async view(limit: Omit<ResolvedLimit, 'family'>): Promise<LimitView> {
    // A family is the default of many keys, each with its own figures: it has none of its own.
    const figures = isFamily(limit.key) ? null : await this.live.inspect(limit.key);
    return {
      ...limit,
      running: figures?.running ?? null,
      waiting: figures?.waiting ?? null,
      startsLastPeriod: figures?.startsLastPeriod ?? null,
    };
  }

  private async changed(name: string): Promise<void> {
    await this.deps.catalog.refresh(true);
    this.onChanged(name);
  }
}

function specOf(d: LimitDeclaration): LimitSpec {
  return { concurrency: d.concurrency, rate: d.rate, onLimit: d.onLimit, weight: d.weight };
}

function resolved(d: LimitDeclaration, key: string): Omit<ResolvedLimit, 'family'> {
  return { ...specOf(d), key, declaredAs: d.name };
}

function notDeclared(name: string): WheelhouseError {
  return new WheelhouseError('not_found', `No limit ${name} is declared, nor a family that covers it.`, {
    details: { name },
  });
}

/** A page token: the last name of the page, base64url, so clients treat it as opaque. */
function tokenOfName(name: string): string {
  return Buffer.from(name, 'utf8').toString('base64url');
}

function nameOfToken(token: string): string {
  const name = Buffer.from(token, 'base64url').toString('utf8');
  if (name === '' || tokenOfName(name) !== token || !/^[A-Za-z0-9_.:*-]{1,200}$/.test(name)) {
    throw new WheelhouseError('validation_failed', 'next_token: is not a token this node issued', {
      details: { field: 'next_token' },
    });
  }
  return name;
}
