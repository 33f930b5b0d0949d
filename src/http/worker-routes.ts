import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WheelhouseError } from '../lib/errors.js';
import type { Assignment, WorkersApi } from '../services/types.js';
import { workerRoutesSchemas as schemas } from './schemas/workers.js';
import { completionRequest, completionRequests, heartbeatRequest, pollRequest } from './validation/requests.js';
import { assignmentJson, iso } from './serialize.js';
import { WorkerSlots } from './worker-slots.js';

/**
 * The worker routes of API.md — long-poll, heartbeat, complete — for workers in any language,
 * plus one extension:
 *
 * `POST /api/workers/complete` `{results: [{task_id, lease_token, status, error?, retryable?}]}`
 * (1–1 000 items) → `200 {results: [{task_id, ok}]}`. Records many results in one request,
 * so a worker finishing tens of thousands of tasks a second does not need one request per
 * task. `ok: false` means that lease is no longer held and that result was discarded (the
 * single-task route answers 409 for the same case). One malformed item rejects the whole
 * request with 400 and its `details.index`; nothing is recorded.
 *
 * Results and progress (extensions): a completion may carry `result` (any JSON, stored with a
 * task that succeeds) and a heartbeat `progress` (the task's latest progress), each held to
 * `maxResultBytes`: over it is a 400 naming the field, and nothing of the request is recorded.
 */

export interface WorkerRoutesOptions {
  api: WorkersApi;
  /** Longest long-poll this node allows, ms. */
  pollMaxWaitMs: number;
  /** Most task types in one poll. @default the schema's ceiling */
  pollMaxTaskTypes?: number;
  /** Long-polls held at once; one more is a 429 `too_many_polls`. @default unbounded */
  pollMaxConcurrent?: number;
  /**
   * The budget the polls share with the worker-channel sockets (decision 0021); without one,
   * the polls have `pollMaxConcurrent` to themselves.
   */
  slots?: WorkerSlots;
  /** A poll answer stops adding tasks past this many bytes of JSON (it always holds one). @default unbounded */
  maxPageBytes?: number;
  /** Body limit of `POST /api/workers/complete`, bytes. */
  batchBodyLimitBytes: number;
  /** Largest `result` or `progress`, bytes of JSON. @default unchecked */
  maxResultBytes?: number;
  /**
   * Body limit of the single heartbeat and complete routes, bytes, so that a result or progress
   * of `maxResultBytes` fits. @default the server's body limit
   */
  resultBodyLimitBytes?: number;
}

export const workerRoutes: FastifyPluginAsync<WorkerRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api } = opts;
  // Workers call these routes all the time (every poll, heartbeat and result): at `info` their
  // request lines would drown every other line, so there they log from `warn` up. A failure the
  // error handler logs still shows; a routine 409 for a lost lease does not. At `debug` or
  // `trace` they log like any route, and a stricter level applies to them as to the rest.
  const quiet = app.log.level === 'info' ? ({ logLevel: 'warn' } as const) : {};
  const limits = {
    pollMaxWaitMs: opts.pollMaxWaitMs,
    ...(opts.pollMaxTaskTypes === undefined ? {} : { pollMaxTaskTypes: opts.pollMaxTaskTypes }),
  };
  const slots = opts.slots ?? new WorkerSlots(opts.pollMaxConcurrent ?? Infinity);
  const maxPageBytes = opts.maxPageBytes ?? Infinity;
  const resultLimits = opts.maxResultBytes === undefined ? {} : { maxResultBytes: opts.maxResultBytes };
  const withResult = opts.resultBodyLimitBytes === undefined ? {} : { bodyLimit: opts.resultBodyLimitBytes };
  /** Polls in flight, aborted when the server closes so that shutdown does not wait out a 30 s poll. */
  const polls = new Set<AbortController>();
  app.addHook('preClose', async () => {
    for (const controller of polls) controller.abort();
  });

  /**
   * Long-poll: answers once a task is claimed, or `{tasks: []}` after `wait_ms`, or when the
   * server closes. Past `pollMaxConcurrent` polls in flight and worker sockets open, 429
   * `too_many_polls` at once: each waiting poll holds a connection and is woken by every push of
   * its types.
   */
  app.post('/api/workers/poll', { ...quiet, schema: schemas.poll }, async (request, reply) => {
    const poll = pollRequest(request.body, limits);
    slots.takePoll();
    const controller = new AbortController();
    const stopWatching = abortOnDisconnect(reply, controller);
    polls.add(controller);
    let assignments;
    try {
      assignments = await api.poll(poll, controller.signal);
    } finally {
      polls.delete(controller);
      slots.givePoll();
      stopWatching();
    }
    const res = reply.raw;
    if (assignments.length > 0 && (controller.signal.aborted || res.destroyed)) {
      // The worker went away while its tasks were being claimed: hand them back now rather
      // than let them wait out a lease nobody holds. Nothing more can be written to it.
      await api.release(assignments);
      return { tasks: [] };
    }
    const [page, over] = withinPageBytes(assignments, maxPageBytes);
    if (over.length > 0) {
      // Past the page's bytes: handed back at once (the attempt not counted), as for a worker
      // gone away; the next poll gets them.
      await api.release(over);
      assignments = page;
    }
    if (assignments.length > 0) {
      const claimed = assignments;
      // Gone before the answer was fully written: the worker never saw these tasks.
      res.once('close', () => {
        if (!res.writableFinished) void api.release(claimed);
      });
    }
    return { tasks: assignments.map(assignmentJson) };
  });

  /**
   * Extends the lease (with `extend_seconds`, the deadline first); with `progress`, then
   * records it. The lease is checked by its actor and the progress by its own compare-and-set:
   * one that loses the race with the end of the attempt is dropped, and the heartbeat that
   * extended the lease still answers 200. Past the deadline: 409, the attempt is over.
   */
  app.post('/api/tasks/:task_id/heartbeat', { ...quiet, ...withResult, schema: schemas.heartbeat }, async (request) => {
    const taskId = request.params.task_id.toLowerCase();
    const body = heartbeatRequest(request.body, resultLimits);
    const lease = await api.heartbeat(taskId, body.leaseToken, body.extendSeconds);
    if (body.progress !== undefined) {
      await api.progress([{ taskId, leaseToken: body.leaseToken, progress: body.progress }]);
    }
    return {
      ok: true as const,
      lease_expires_at: iso(lease.leaseExpiresMs),
      deadline_at: iso(lease.deadlineMs) as string,
      cancel_requested: lease.cancelRequested,
    };
  });

  /** One result; 409 `lease_not_held` when the lease was lost (the result is discarded). */
  app.post('/api/tasks/:task_id/complete', { ...quiet, ...withResult, schema: schemas.complete }, async (request) => {
    const taskId = request.params.task_id.toLowerCase();
    const [result] = await api.complete([completionRequest(taskId, request.body, resultLimits)]);
    if (!result?.ok) {
      throw new WheelhouseError('lease_not_held', undefined, { details: { task_id: taskId } });
    }
    return { ok: true as const };
  });

  /** The batch extension described above. */
  const batchOptions = { ...quiet, schema: schemas.completeBatch, bodyLimit: opts.batchBodyLimitBytes };
  app.post('/api/workers/complete', batchOptions, async (request) => {
    const completions = completionRequests(request.body, resultLimits);
    let results: { taskId: string; ok: boolean }[];
    try {
      results = await api.complete(completions);
    } catch (error) {
      // The service may signal a lost lease by throwing when it is given a single result;
      // in a batch that is an item's `ok: false`, not a failed request.
      if (completions.length === 1 && error instanceof WheelhouseError && error.code === 'lease_not_held') {
        results = [{ taskId: completions[0]?.taskId ?? '', ok: false }];
      } else {
        throw error;
      }
    }
    return { results: results.map((r) => ({ task_id: r.taskId, ok: r.ok })) };
  });
};

/** What an assignment adds to a poll answer besides its payload, bytes: ids, type, token, times. */
const ASSIGNMENT_BYTES = 320;

/**
 * The assignments that fit in `maxBytes` of answer (at least the first), and the rest. A payload
 * counts as its JSON; measured only when the page could pass the bound.
 */
function withinPageBytes(assignments: Assignment[], maxBytes: number): [Assignment[], Assignment[]] {
  if (assignments.length <= 1 || maxBytes === Infinity) return [assignments, []];
  let bytes = 0;
  for (let i = 0; i < assignments.length; i++) {
    const payload = (assignments[i] as Assignment).payload;
    bytes +=
      ASSIGNMENT_BYTES + (payload === null || payload === undefined ? 4 : Buffer.byteLength(JSON.stringify(payload)));
    if (bytes > maxBytes && i > 0) return [assignments.slice(0, i), assignments.slice(i)];
  }
  return [assignments, []];
}

/**
 * Aborts `controller` if the client goes away before the answer is written. The response's
 * `close` is the signal to watch: the request's `close` (and so fastify's `request.signal`)
 * fires as soon as the body has been read, which for a POST is before the handler runs.
 * Returns a function that stops watching.
 */
function abortOnDisconnect(reply: FastifyReply, controller: AbortController): () => void {
  const res = reply.raw;
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort();
  };
  if (res.destroyed || res.socket?.destroyed === true) controller.abort();
  res.on('close', onClose);
  return () => res.off('close', onClose);
}
