import Type from 'typebox';
import { MAX_LIMIT_NAME_LENGTH, MAX_LIMITS_PER_TASK } from '../../domain/limits.js';

/** The flow-control fields of a submit (API.md "Flow control"): `limits` and `debounce`. */

/** Longest `debounce.seconds` and `debounce.max_wait_seconds`: a week. */
export const MAX_DEBOUNCE_SECONDS = 7 * 86_400;

/** `debounce` of a submit (API.md "Flow control"); the rules a schema cannot say are in validation/tasks.ts. */
export const Debounce = Type.Object(
  {
    key: Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: '^[A-Za-z0-9_.:@/=+-]+$',
      'x-hint': 'contain only letters, digits and _ . : @ / = + -',
      examples: ['sync-user-7'],
    }),
    seconds: Type.Number({
      exclusiveMinimum: 0,
      maximum: MAX_DEBOUNCE_SECONDS,
      description: 'Each submit of the key moves the waiting task this far after now.',
    }),
    max_wait_seconds: Type.Number({
      exclusiveMinimum: 0,
      maximum: MAX_DEBOUNCE_SECONDS,
      description: "Never later than this after the waiting task's first submit; at least `seconds`.",
    }),
  },
  {
    additionalProperties: false,
    description:
      'While a task of this type and key is pending, a submit replaces its payload and moves its due time instead of making a task. Not with a schedule, dependencies or an idempotency key.',
  },
);

/** `limits` of a submit: the names of the limits the task takes part in. */
export const TaskLimits = Type.Array(
  Type.String({
    minLength: 1,
    maxLength: MAX_LIMIT_NAME_LENGTH,
    pattern: '^[A-Za-z0-9_.:*-]+$',
    examples: ['customer:42'],
  }),
  {
    maxItems: MAX_LIMITS_PER_TASK,
    description:
      "Limits the task takes part in (declared, or covered by a declared family); it starts only when each, and its type's, has room. Not a family, not type:<…>.",
  },
);
