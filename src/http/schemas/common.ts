import Type, { type Static, type TSchema, type TString, type TUnsafe } from 'typebox';
import { ERROR_CATALOGUE, ERROR_CODES, type ErrorCode } from '../../lib/errors.js';
import type { Scope } from '../../services/api-keys.js';
import { STORED_STATUSES } from '../../domain/model.js';

/**
 * The building blocks of the route schemas: the one description of the HTTP contract. Fastify
 * validates requests with them (src/http/validation/ajv.ts turns Ajv's errors into the
 * catalogue's, naming the field), serializes responses from them, and @fastify/swagger builds
 * the OpenAPI document from them. The TypeScript types of the bodies are `Static<typeof X>`.
 *
 * Two annotations of our own, which Ajv is told to accept, word the error messages: `x-hint`
 * says what a `pattern` allows (`task_type: must contain only letters, …`), `x-expect` what a
 * value of the wrong type should have been (`must be an ISO-8601 time string`). Optional fields
 * accept `null` as "left out" (`Nullable`), because clients serialise absent values either way.
 */

/** A schema that also accepts `null`: `type: [T, 'null']` (an enum gains `null` too). */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const s = schema as unknown as { type?: unknown; enum?: unknown[]; $ref?: string };
  // A reference cannot take a second type: either it, or null.
  if (typeof s.$ref === 'string') return Type.Unsafe<Static<T> | null>({ anyOf: [schema, { type: 'null' }] });
  if (typeof s.type !== 'string') throw new Error('Nullable needs a schema with one type, or a reference');
  const out: Record<string, unknown> = { ...(schema as object), type: [s.type, 'null'] };
  if (Array.isArray(s.enum)) out.enum = [...s.enum, null];
  return Type.Unsafe<Static<T> | null>(out);
}

/** A string out of a fixed set, typed as the union of its values. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: Record<string, unknown> = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/** A reference to a shared schema (registered with `$id`, see `SHARED_SCHEMAS`), typed as it. */
export function Ref<T extends TSchema>(id: string): TUnsafe<Static<T>> {
  return Type.Unsafe<Static<T>>({ $ref: `${id}#` });
}

export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

/** A task (or graph) id: a UUID, any case (the routes lower-case it). */
export const Uuid = Type.String({ format: 'uuid', pattern: UUID_PATTERN, 'x-hint': 'be a task id (a UUID)' });

/** A W3C `traceparent` of version 00, as a client sends one (lower-case hex). */
export const TRACEPARENT_PATTERN = '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$';

export const TASK_TYPE_PATTERN = '^[A-Za-z0-9_.:-]+$';

/**
 * Text Postgres stores (`text`, `jsonb`) is UTF-8 without U+0000: a NUL is refused, and a lone
 * surrogate (not UTF-8) is stored as U+FFFD, so an idempotency key holding one did not read
 * back as itself. A string field that reaches a column matches this (Ajv reads patterns as
 * Unicode: a surrogate pair is one code point, outside the excluded range), so either is a
 * 400 naming the field rather than the store's error.
 */
export const STORED_TEXT_PATTERN = '^[^\\u0000\\ud800-\\udfff]*$';

/** A string Postgres stores as sent (no U+0000, no lone surrogate), 1–`maxLength` characters. */
export function StoredText(maxLength: number, options: Record<string, unknown> = {}): TString {
  return Type.String({
    minLength: 1,
    maxLength,
    pattern: STORED_TEXT_PATTERN,
    'x-hint': 'be text without U+0000 or unpaired surrogates',
    ...options,
  });
}

/** A task type: 1–128 characters of letters, digits and `_ . : -`. */
export const TaskType = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: TASK_TYPE_PATTERN,
  'x-hint': 'contain only letters, digits and _ . : -',
  examples: ['email.send'],
});

/** A time as the API writes it: ISO-8601 UTC with milliseconds. */
export const Time = Type.String({ format: 'date-time', examples: ['2026-11-30T12:00:00.000Z'] });
export const NullableTime = Nullable(Time);

/** A time as a client may send it: ISO-8601, checked by `parseIsoTime` (a date alone is midnight UTC). */
export const TimeInput = Type.String({
  maxLength: 64,
  'x-expect': 'an ISO-8601 time string',
  description: 'ISO-8601 (2026-11-30T12:00:00Z, …+02:00, or a date: midnight UTC). Without an offset: UTC.',
});

/** What a client may see: the stored statuses and the derived `ready`. */
export const TASK_STATUSES = [...STORED_STATUSES, 'ready'] as const;
export const TaskStatus = StringEnum(TASK_STATUSES);

/** `{ok: true}`. */
export const Ok = Type.Object({ ok: Type.Literal(true) }, { additionalProperties: false });

/** The body of every error answer. */
export const ErrorBody = Type.Object(
  {
    error: Type.Object(
      {
        code: StringEnum(ERROR_CODES, {
          description: 'What went wrong, for programs to branch on. Each error response lists the codes it carries.',
          examples: ['validation_failed'],
        }),
        message: Type.String({ examples: ['schedule.cron_expression: "* *" has 2 fields; …'] }),
        details: Type.Record(Type.String(), Type.Unknown(), {
          description: '`field` names the failing field; `index` the task in a batch.',
        }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, title: 'Error' },
);
export type ErrorBodyJson = Static<typeof ErrorBody>;

const ERROR_SUMMARY: Record<number, string> = {
  400: 'Malformed JSON, a schema violation, a bad cron expression, an unknown time zone, …',
  401: 'Bearer token missing (when auth is on).',
  403: 'The key has none of the scopes that open the route; or a Host or Origin the node does not answer.',
  404: 'Nothing has this id, or no such route.',
  405: 'The route does not take this method.',
  409: 'Idempotency conflict, lease no longer held, task already finished, or a limit still in use.',
  413: 'Body larger than the configured limit.',
  415: 'Body is not application/json.',
  429: 'Ready backlog past its limit, or (a poll) the node holds as many long-polls as it allows. Carries Retry-After.',
  500: 'A bug: the answer carries a request id to find the log line.',
  503: 'Store unreachable or node not ready. Carries Retry-After.',
};

/** The error codes answered with `status`, from the catalogue. */
export function codesOf(status: number): ErrorCode[] {
  return ERROR_CODES.filter((code) => ERROR_CATALOGUE[code].status === status);
}

/**
 * Response schemas of error statuses, each a reference to `Error` whose description lists the
 * codes of that status (`Codes: \`validation_failed\`, …`).
 */
export function errors(...statuses: number[]): Record<string, TSchema> {
  const out: Record<string, TSchema> = {};
  for (const status of statuses) {
    const codes = codesOf(status)
      .map((c) => `\`${c}\``)
      .join(', ');
    out[String(status)] = Type.Unsafe({
      $ref: 'Error#',
      description: `${ERROR_SUMMARY[status] ?? 'Error.'} Codes: ${codes}.`,
    });
  }
  return out;
}

/** The error answers almost every API route can give. */
export const COMMON_ERRORS = [400, 401, 403, 413, 415, 429, 500, 503] as const;

/**
 * The scopes that open a route, as OpenAPI writes them (`security: [{bearer: ['ops']},
 * {bearer: ['admin']}]`: role names of a bearer scheme, one requirement each, any of them
 * enough). The server's auth hook reads them from the same place, so the document and the
 * check cannot disagree, and test/http/contract.test.ts fails on a route that names none.
 */
export function needs(...scopes: [Scope, ...Scope[]]): { security: { bearer: Scope[] }[] } {
  return { security: scopes.map((scope) => ({ bearer: [scope] })) };
}

/** A route anyone may call, with or without a key. */
export const OPEN = { security: [] as { bearer: Scope[] }[] };
