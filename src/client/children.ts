import type { Transport } from './http.js';
import type { NewTask, TaskStatus } from './types.js';
import { itemsOf, nextTokenFromWire, taskToWire } from './wire.js';

/** A child to spawn: a task as `submit` takes it (not a cron schedule, no dependencies) and its key. */
export interface NewChild extends Omit<NewTask, 'dependencies'> {
  /** Its name within the parent: spawning it again answers the child made first. Left out: always new. */
  childKey?: string;
}

/** A child as a spawn answers it. */
export interface SpawnedChild {
  taskId: string;
  status: TaskStatus;
  dueTime: Date | null;
  childKey: string | null;
}

/** A child as its parent's listing shows it. */
export interface Child {
  taskId: string;
  childKey: string | null;
  status: TaskStatus;
  result: unknown;
  lastError: string | null;
}

export interface ChildPage {
  children: Child[];
  nextToken: string | null;
}

export interface ChildListOptions {
  status?: TaskStatus;
  /** 1–1 000. @default 100 */
  limit?: number;
  nextToken?: string | null;
}

/**
 * Children of a running task (`client.children`, API.md "Children of a running task"). Reading
 * them needs a `read` key; spawning is for the worker that runs the parent (a `work` key and
 * the attempt's lease token) — a handler of the worker SDK has `ctx.spawn` for it.
 */
export interface ChildrenClient {
  /** One page of `GET /api/tasks/{id}/children`, in the order they were spawned. */
  listPage(taskId: string, options?: ChildListOptions): Promise<ChildPage>;
  /** Every child, page after page. */
  list(taskId: string, options?: Omit<ChildListOptions, 'nextToken'>): AsyncIterable<Child>;
  /**
   * `POST /api/tasks/{id}/children`: up to 1 000 children, all or none, answered in request order.
   * Retried after a network error only when every child has a `childKey` (then a retry adds none twice).
   */
  spawn(taskId: string, leaseToken: string, tasks: NewChild[]): Promise<SpawnedChild[]>;
}

export function childrenClient(http: Transport): ChildrenClient {
  const path = (id: string): string => `/api/tasks/${encodeURIComponent(id)}/children`;
  const listPage = async (taskId: string, options: ChildListOptions = {}): Promise<ChildPage> => {
    const { body } = await http.send({
      method: 'GET',
      path: path(taskId),
      query: { status: options.status, limit: options.limit, next_token: options.nextToken ?? undefined },
      idempotent: true,
    });
    return {
      children: itemsOf((body as { children?: unknown }).children).map(childFromWire),
      nextToken: nextTokenFromWire(body),
    };
  };
  return {
    listPage,

    async *list(taskId, options = {}) {
      let nextToken: string | null = null;
      do {
        const page: ChildPage = await listPage(taskId, { ...options, nextToken });
        yield* page.children;
        nextToken = page.nextToken;
      } while (nextToken !== null);
    },

    async spawn(taskId, leaseToken, tasks) {
      const answer = await http.send({
        method: 'POST',
        path: path(taskId),
        body: {
          lease_token: leaseToken,
          tasks: tasks.map(({ childKey, ...task }) => ({ ...taskToWire(task), child_key: childKey })),
        },
        idempotent: tasks.every((t) => t.childKey !== undefined),
      });
      return itemsOf((answer.body as { tasks?: unknown }).tasks).map((t) => {
        const o = t as Record<string, unknown>;
        return {
          taskId: String(o.task_id),
          status: o.status as TaskStatus,
          dueTime: typeof o.due_time === 'string' ? new Date(o.due_time) : null,
          childKey: typeof o.child_key === 'string' ? o.child_key : null,
        };
      });
    },
  };
}

function childFromWire(body: unknown): Child {
  const o = body as Record<string, unknown>;
  return {
    taskId: String(o.task_id),
    childKey: typeof o.child_key === 'string' ? o.child_key : null,
    status: o.status as TaskStatus,
    result: o.result ?? null,
    lastError: typeof o.last_error === 'string' ? o.last_error : null,
  };
}
