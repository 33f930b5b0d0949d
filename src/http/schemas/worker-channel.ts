import Type, { type Static } from 'typebox';
import { MAX_POLL_TASK_TYPES } from '../../lib/config.js';
import { COMMON_ERRORS, Nullable, StoredText, StringEnum, TaskType, Uuid, errors, needs } from './common.js';
import { MAX_TIMEOUT_SECONDS } from './tasks.js';
import { MAX_BATCH_COMPLETIONS, OnChildFailure, OUTCOMES } from './workers.js';

/**
 * The worker channel (API.md, "Workers as remote actors"): the frames a worker sends over its
 * WebSocket, each a JSON object with a `type`, and the upgrade route. Each frame is held to its
 * schema like a request body, so a malformed one is a `validation_failed` naming the field.
 */

/** Credits one frame may grant, and the most a socket holds. */
export const MAX_FRAME_CREDITS = 1_000_000;

/**
 * Leases one `hello` may resume: as many as one claim takes (`MAX_CLAIM`), so that a hello
 * costs the node no more lease checks than a claim costs it rows. More is a `validation_failed`.
 */
export const MAX_RESUME = 1_000;

/** A lease token as a worker sends it back; any other token is refused like a wrong one. */
const LeaseToken = Type.String({ maxLength: 512 });

export const WORKER_FRAME_TYPES = ['hello', 'credit', 'results', 'progress', 'spawn', 'goodbye'] as const;
export type WorkerFrameType = (typeof WORKER_FRAME_TYPES)[number];

export const HelloFrame = Type.Object(
  {
    type: Type.Literal('hello'),
    worker_id: StoredText(128),
    task_types: Type.Array(TaskType, { minItems: 1, maxItems: MAX_POLL_TASK_TYPES }),
    credits: Type.Integer({ minimum: 0, maximum: MAX_FRAME_CREDITS }),
    resume: Type.Optional(
      Nullable(
        Type.Array(Type.Object({ task_id: Uuid, lease_token: LeaseToken }, { additionalProperties: false }), {
          maxItems: MAX_RESUME,
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type HelloFrameJson = Static<typeof HelloFrame>;

export const CreditFrame = Type.Object(
  { type: Type.Literal('credit'), n: Type.Integer({ minimum: 1, maximum: MAX_FRAME_CREDITS }) },
  { additionalProperties: false },
);

export const ResultsFrame = Type.Object(
  {
    type: Type.Literal('results'),
    results: Type.Array(
      Type.Object(
        {
          task_id: Uuid,
          lease_token: LeaseToken,
          status: StringEnum(OUTCOMES),
          on_child_failure: OnChildFailure,
          error: Type.Optional(Nullable(Type.String())),
          retryable: Type.Optional(Nullable(Type.Boolean())),
          result: Type.Optional(Type.Unknown()),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH_COMPLETIONS },
    ),
  },
  { additionalProperties: false },
);
export type ResultsFrameJson = Static<typeof ResultsFrame>;

export const ProgressFrame = Type.Object(
  {
    type: Type.Literal('progress'),
    updates: Type.Array(
      Type.Object(
        {
          task_id: Uuid,
          lease_token: LeaseToken,
          progress: Type.Optional(Type.Unknown({ description: 'The latest progress; leave it out to send none.' })),
          extend_seconds: Type.Optional(
            Type.Number({
              exclusiveMinimum: 0,
              maximum: MAX_TIMEOUT_SECONDS,
              description:
                "Push the attempt's deadline to at least now + this many seconds (within max_timeout_seconds of its start); answered by an `extended` frame.",
            }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH_COMPLETIONS },
    ),
  },
  { additionalProperties: false },
);
export type ProgressFrameJson = Static<typeof ProgressFrame>;

/**
 * Children for a running task whose lease the worker holds, answered by a `spawned` frame with
 * the same `request_id`. The children themselves are checked as `POST /api/tasks/{id}/children`
 * checks them (src/http/validation/children.ts), and a bad one is answered there, not refused
 * as a malformed frame is.
 */
export const SpawnFrame = Type.Object(
  {
    type: Type.Literal('spawn'),
    request_id: StoredText(128),
    task_id: Uuid,
    lease_token: LeaseToken,
    tasks: Type.Array(Type.Unknown()),
  },
  { additionalProperties: false },
);

export const GoodbyeFrame = Type.Object({ type: Type.Literal('goodbye') }, { additionalProperties: false });

/** Any frame a worker sends, as its schema has it. */
export type WorkerFrame =
  | HelloFrameJson
  | Static<typeof CreditFrame>
  | ResultsFrameJson
  | ProgressFrameJson
  | Static<typeof SpawnFrame>
  | Static<typeof GoodbyeFrame>;

export const WORKER_FRAMES = {
  hello: HelloFrame,
  credit: CreditFrame,
  results: ResultsFrame,
  progress: ProgressFrame,
  spawn: SpawnFrame,
  goodbye: GoodbyeFrame,
} as const;

export const workerChannelSchemas = {
  connect: {
    ...needs('work'),
    tags: ['workers'],
    summary: 'Open the worker channel (WebSocket)',
    description:
      'Upgrades to a WebSocket: the worker says `hello`, the node pushes claimed tasks within the credits granted, ' +
      'results come back in batches and are acknowledged (API.md, "Workers as remote actors"). A request that ' +
      'does not ask to upgrade is a 400.',
    response: {
      101: Type.Null({ description: 'Switching Protocols: the socket is open; every frame is one JSON object.' }),
      ...errors(...COMMON_ERRORS),
    },
  },
};
