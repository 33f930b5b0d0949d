import Type from 'typebox';
import { COMMON_ERRORS, Ref, errors, needs } from './common.js';
import {
  BatchRequest,
  Dag,
  DagIdParams,
  DagRequest,
  DagSubmitted,
  HistoryPage,
  HistoryQuery,
  ListQuery,
  Submitted,
  Task,
  TaskIdParams,
  TaskPage,
  TaskRequest,
} from './tasks.js';

/**
 * What each task and graph route takes and answers, its scope and its words in the OpenAPI
 * document. The shapes themselves are in ./tasks.ts.
 */

/** The route schemas of src/http/tasks-routes.ts and dag-routes.ts. */
export const taskRoutes = {
  submit: {
    ...needs('submit'),
    tags: ['tasks'],
    summary: 'Submit a task',
    body: Ref<typeof TaskRequest>('TaskRequest'),
    response: {
      201: { ...Ref<typeof Submitted>('Submitted'), description: 'Created' },
      200: {
        ...Ref<typeof Submitted>('Submitted'),
        description: 'Idempotent replay: the earlier task, nothing created',
      },
      ...errors(...COMMON_ERRORS, 409),
    },
  },
  batch: {
    ...needs('submit'),
    tags: ['tasks'],
    summary: 'Submit up to 1 000 tasks, all or nothing',
    description: 'One invalid task rejects the batch with 400 and its details.index.',
    body: BatchRequest,
    response: {
      201: Type.Object(
        { tasks: Type.Array(Ref<typeof Submitted>('Submitted')) },
        { additionalProperties: false, description: 'Created, in request order' },
      ),
      ...errors(...COMMON_ERRORS, 409),
    },
  },
  get: {
    ...needs('read'),
    tags: ['tasks'],
    summary: 'Task status',
    params: TaskIdParams,
    response: { 200: Ref<typeof Task>('Task'), ...errors(400, 401, 403, 404, 500, 503) },
  },
  list: {
    ...needs('read'),
    tags: ['tasks'],
    summary: 'List tasks, newest first',
    querystring: ListQuery,
    response: { 200: TaskPage, ...errors(400, 401, 403, 500, 503) },
  },
  cancel: {
    ...needs('submit'),
    tags: ['tasks'],
    summary: 'Cancel a task (a cron schedule: the schedule and its pending instance)',
    params: TaskIdParams,
    response: {
      200: Type.Object(
        { ok: Type.Literal(true), cancelled_instances: Type.Integer() },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 404, 409, 500, 503),
    },
  },
  retry: {
    ...needs('submit'),
    tags: ['tasks'],
    summary: 'Run a failed or cancelled task again, as a new attempt',
    description:
      'The task goes back to pending, due now; attempts keep counting and the history keeps every earlier ' +
      'execution. Dependents cancelled because it failed are not revived. Any other status, a cron schedule, ' +
      'or a task whose dependencies have not all succeeded: 409 invalid_transition.',
    params: TaskIdParams,
    response: { 200: Ref<typeof Task>('Task'), ...errors(400, 401, 403, 404, 409, 500, 503) },
  },
  pause: {
    ...needs('submit'),
    tags: ['schedules'],
    summary: 'Pause a cron schedule: it stops firing and its pending instance is cancelled',
    params: TaskIdParams,
    response: { 200: Ref<typeof Task>('Task'), ...errors(400, 401, 403, 404, 409, 500, 503) },
  },
  resume: {
    ...needs('submit'),
    tags: ['schedules'],
    summary: 'Resume a paused cron schedule from now (no catch-up of the paused time)',
    params: TaskIdParams,
    response: { 200: Ref<typeof Task>('Task'), ...errors(400, 401, 403, 404, 409, 500, 503) },
  },
  history: {
    ...needs('read'),
    tags: ['tasks'],
    summary: 'Execution history, newest first',
    params: TaskIdParams,
    querystring: HistoryQuery,
    response: { 200: HistoryPage, ...errors(400, 401, 403, 404, 500, 503) },
  },
  submitDag: {
    ...needs('submit'),
    tags: ['dags'],
    summary: 'Submit a graph of tasks, all or nothing',
    description:
      'Each task has a local `ref`; `depends_on` names refs of this request or existing task ids. A cycle, an ' +
      'unknown ref or id, a duplicate ref or any invalid task is a 400 and creates nothing. Up to 10 000 tasks.',
    body: DagRequest,
    response: {
      201: { ...DagSubmitted, description: 'Created' },
      200: { ...DagSubmitted, description: 'Idempotent replay: the earlier graph, nothing created' },
      ...errors(...COMMON_ERRORS, 409),
    },
  },
  getDag: {
    ...needs('read'),
    tags: ['dags'],
    summary: 'A graph with the status of each task',
    params: DagIdParams,
    response: { 200: Dag, ...errors(400, 401, 403, 404, 500, 503) },
  },
} as const;
