import type { Transport } from './http.js';
import type {
  Limit,
  LimitDeclaration,
  LimitListFilter,
  LimitPage,
  LimitRate,
  OnLimit,
  TaskTypePause,
} from './types.js';
import { itemsOf, nextTokenFromWire } from './wire.js';

/**
 * The flow-control part of the client (`client.limits`, API.md "Flow control"): declare, read,
 * list and remove limits, pause and resume a task type. Declaring needs an `admin` key,
 * reading a `read` one. Errors are the client's (`ConflictError` for `limit_in_use`,
 * `NotFoundError` for an unknown name, `ValidationError` for a bad one or a bad value).
 */
export interface LimitsClient {
  /** `PUT /api/limits/{name}`: declares or changes a key or a family (`customer:*`). Answers it as stored. */
  put(name: string, declaration: LimitDeclaration): Promise<Limit>;
  /** `GET /api/limits/{name}`: its values (its family's if only that is declared) and live figures. */
  get(name: string): Promise<Limit>;
  /** One page of `GET /api/limits`, in name order. */
  listPage(filter?: LimitListFilter): Promise<LimitPage>;
  /** Every declared limit that matches, page after page. */
  list(filter?: Omit<LimitListFilter, 'nextToken'>): AsyncIterable<Limit>;
  /** `DELETE /api/limits/{name}`: refused with `limit_in_use` while waiting tasks take part in it. */
  delete(name: string): Promise<void>;
  /** `POST /api/task-types/{task_type}/pause`: running tasks finish, none of the type starts. */
  pauseTaskType(taskType: string): Promise<TaskTypePause>;
  /** `POST /api/task-types/{task_type}/resume`. */
  resumeTaskType(taskType: string): Promise<TaskTypePause>;
}

export function limitsClient(http: Transport): LimitsClient {
  const limitPath = (name: string): string => `/api/limits/${encodeURIComponent(name)}`;
  const typePath = (taskType: string, verb: string): string =>
    `/api/task-types/${encodeURIComponent(taskType)}/${verb}`;

  const listPage = async (filter: LimitListFilter = {}): Promise<LimitPage> => {
    const { body } = await http.send({
      method: 'GET',
      path: '/api/limits',
      query: { prefix: filter.prefix, limit: filter.limit, next_token: filter.nextToken },
      idempotent: true,
    });
    return {
      limits: itemsOf((body as { limits?: unknown }).limits).map(limitFromWire),
      nextToken: nextTokenFromWire(body),
    };
  };

  return {
    async put(name, declaration) {
      // PUT sets the whole declaration: sending it twice leaves what sending it once does.
      const answer = await http.send({
        method: 'PUT',
        path: limitPath(name),
        body: limitToWire(declaration),
        idempotent: true,
      });
      return limitFromWire(answer.body);
    },

    async get(name) {
      return limitFromWire((await http.send({ method: 'GET', path: limitPath(name), idempotent: true })).body);
    },

    listPage,

    async *list(filter = {}) {
      let nextToken: string | null = null;
      do {
        const page = await listPage({ ...filter, nextToken });
        yield* page.limits;
        nextToken = page.nextToken;
      } while (nextToken !== null);
    },

    async delete(name) {
      // Not retried after a network error: a second DELETE of what the first removed is a 404.
      await http.send({ method: 'DELETE', path: limitPath(name), idempotent: false });
    },

    async pauseTaskType(taskType) {
      const answer = await http.send({ method: 'POST', path: typePath(taskType, 'pause'), idempotent: true });
      return typePauseFromWire(answer.body);
    },

    async resumeTaskType(taskType) {
      const answer = await http.send({ method: 'POST', path: typePath(taskType, 'resume'), idempotent: true });
      return typePauseFromWire(answer.body);
    },
  };
}

type Json = Record<string, unknown>;

/** A declaration on the wire: what was left out stays out, so the node's defaults apply. */
export function limitToWire(d: LimitDeclaration): Json {
  const out: Json = {};
  if (d.concurrency !== undefined) out.concurrency = d.concurrency;
  if (d.rate !== undefined) {
    out.rate =
      d.rate === null
        ? null
        : {
            limit: d.rate.limit,
            period_seconds: d.rate.periodSeconds,
            ...(d.rate.burst === undefined ? {} : { burst: d.rate.burst }),
          };
  }
  if (d.onLimit !== undefined) out.on_limit = d.onLimit;
  if (d.weight !== undefined) out.weight = d.weight;
  return out;
}

export function limitFromWire(body: unknown): Limit {
  const o = (body ?? {}) as Json;
  const rate = o.rate as Json | null | undefined;
  return {
    name: String(o.name),
    declaredAs: String(o.declared_as),
    concurrency: numberOrNull(o.concurrency),
    rate:
      rate === null || rate === undefined
        ? null
        : ({
            limit: Number(rate.limit),
            periodSeconds: Number(rate.period_seconds),
            burst: Number(rate.burst),
          } satisfies LimitRate),
    onLimit: o.on_limit as OnLimit,
    weight: Number(o.weight),
    running: numberOrNull(o.running),
    waiting: numberOrNull(o.waiting),
    startsLastPeriod: numberOrNull(o.starts_last_period),
  };
}

export function typePauseFromWire(body: unknown): TaskTypePause {
  const o = (body ?? {}) as Json;
  return {
    taskType: String(o.task_type),
    paused: o.paused === true,
    limit: o.limit === null || o.limit === undefined ? null : limitFromWire(o.limit),
  };
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' ? value : null;
}
