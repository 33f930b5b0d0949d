import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { FieldPath } from '../../domain/field-path.js';
import { WheelhouseError } from '../../lib/errors.js';
import { SHARED_SCHEMAS } from '../schemas/index.js';
import { describe } from './fields.js';
import type { SchemaWarmup } from '../schema-warmup.js';

/**
 * Request validation through the route schemas. Two Ajv instances: one for bodies (no type
 * coercion, no defaults filled in, unknown members refused rather than dropped) and one for
 * query strings and path parameters, where every value arrives as a string and `limit=10`
 * must become a number. Ajv's first error becomes the catalogue's `validation_failed` naming
 * the field as the client wrote it (`tasks[3].schedule.type: …`, `query.limit: …`) with
 * `details.field` and, for an item of a batch, `details.index`.
 */

type Part = 'body' | 'query' | 'params';

function newAjv(coerce: boolean): Ajv {
  return new Ajv({
    strict: true,
    // `required: ['type']` beside a discriminated `oneOf` names a member its branches define.
    strictRequired: false,
    allErrors: false,
    // The failing schema and value, to word the message.
    verbose: true,
    discriminator: true,
    allowUnionTypes: true,
    coerceTypes: coerce,
    useDefaults: false,
    removeAdditional: false,
    // Formats are documentation here: times and ids are checked by pattern or by code.
    formats: { uuid: true, 'date-time': true },
    keywords: ['x-hint', 'x-expect'],
    schemas: SHARED_SCHEMAS.map((s) => ({ ...s })),
  });
}

let bodyAjv: Ajv | undefined;
let textAjv: Ajv | undefined;

function ajvFor(part: Part): Ajv {
  if (part === 'body') return (bodyAjv ??= newAjv(false));
  return (textAjv ??= newAjv(true));
}

const compiled = new WeakMap<object, ValidateFunction>();

/** The compiled validator of a schema, for bodies (or, with `part`, query strings and params). */
export function validatorOf(schema: TSchema, part: Part = 'body'): ValidateFunction {
  let validate = part === 'body' ? compiled.get(schema) : undefined;
  if (validate === undefined) {
    validate = ajvFor(part).compile(schema);
    if (part === 'body') compiled.set(schema, validate);
  }
  return validate;
}

/** Throws the catalogue error for the first way `value` breaks `schema`. */
export function assertSchema(schema: TSchema, value: unknown, part: Part = 'body'): void {
  const validate = validatorOf(schema, part);
  if (!validate(value)) throw schemaError(validate.errors ?? [], part);
}

/**
 * Fastify's validator compiler: route schemas compiled by the Ajv above, errors as ours. Each
 * is compiled on the route's first request or by the server's warm-up once it listens, not as
 * it starts: compiling every route's schemas took a third of the embedded node's start
 * (schema-warmup.ts, decision 0047). The contract test compiles them all, so a schema Ajv
 * refuses still fails the suite rather than a request.
 */
export function validatorCompiler(warmup: SchemaWarmup): FastifySchemaCompiler<TSchema> {
  return ({ schema, httpPart }) => {
    const part: Part = httpPart === 'querystring' ? 'query' : httpPart === 'params' ? 'params' : 'body';
    const compiled = warmup.lazy(() => ajvFor(part).compile(schema));
    return (data: unknown) => {
      const validate = compiled();
      return validate(data) ? true : { error: schemaError(validate.errors ?? [], part) };
    };
  };
}

/** Ajv's errors (the first is the one reported) → `validation_failed` naming the field. */
export function schemaError(errors: readonly ErrorObject[], part: Part): WheelhouseError {
  const error = errors[0];
  if (error === undefined) return new WheelhouseError('validation_failed', 'The request does not match its schema.');
  const segments = pointerSegments(error.instancePath);
  const said = wording(error);
  if (said.member !== undefined) segments.push(said.member);
  const at = fieldPath(segments, part);
  try {
    return at.fail(said.message);
  } catch (failed) {
    return failed as WheelhouseError;
  }
}

/** `/tasks/3/schedule` → `['tasks', '3', 'schedule']`. */
function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Items of these arrays are tasks or results of a batch: their index goes into `details.index`. */
const BATCH_ARRAYS = new Set(['tasks', 'results']);

function fieldPath(segments: readonly string[], part: Part): FieldPath {
  const first = segments[0];
  const second = segments[1];
  let at: FieldPath;
  let rest: readonly string[];
  if (part === 'body' && first !== undefined && BATCH_ARRAYS.has(first) && second !== undefined && isIndex(second)) {
    at = new FieldPath(`${first}[${second}]`, Number(second));
    rest = segments.slice(2);
  } else {
    at = new FieldPath(part === 'query' ? 'query' : '');
    rest = segments;
  }
  for (const segment of rest) at = isIndex(segment) ? at.item(Number(segment)) : at.at(segment);
  return at;
}

function isIndex(segment: string): boolean {
  return /^\d+$/.test(segment);
}

interface Wording {
  /** A member to add to the path (the missing or unknown one). */
  member?: string;
  message: string;
}

interface SchemaShape {
  type?: string | string[];
  properties?: Record<string, SchemaShape>;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  enum?: (string | number | boolean | null)[];
  oneOf?: SchemaShape[];
  const?: string | number | boolean | null;
  discriminator?: { propertyName: string };
  'x-hint'?: string;
  'x-expect'?: string;
}

const TYPE_WORDS: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
};

function wording(error: ErrorObject): Wording {
  const parent = (error.parentSchema ?? {}) as SchemaShape;
  const data: unknown = error.data;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return { member: String(params.missingProperty), message: 'is required' };
    case 'additionalProperties':
      return {
        member: String(params.additionalProperty),
        message: `is not a known field (allowed: ${Object.keys(parent.properties ?? {}).join(', ')})`,
      };
    case 'type': {
      if (parent['x-expect'] !== undefined) return { message: `must be ${parent['x-expect']}, got ${describe(data)}` };
      const types = (Array.isArray(parent.type) ? parent.type : [parent.type ?? '']).filter((t) => t !== 'null');
      const words = types.map((t) => TYPE_WORDS[t] ?? t).join(' or ');
      return { message: `must be ${words}, got ${describe(data)}` };
    }
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return { message: `${range(parent.minimum, parent.maximum)}, got ${String(data)}` };
    case 'minLength':
    case 'maxLength': {
      const length = typeof data === 'string' ? data.length : 0;
      const { minLength: min, maxLength: max } = parent;
      const bound =
        max === undefined
          ? `at least ${min} characters long`
          : min === undefined || min === 0
            ? `at most ${max} characters long`
            : min === max
              ? `${min} characters long`
              : `${min}–${max} characters long`;
      return { message: `must be ${bound}, got ${length}` };
    }
    case 'pattern':
      return {
        message: `must ${parent['x-hint'] ?? `match ${String(params.pattern)}`}, got ${describe(data)}`,
      };
    case 'enum':
      return {
        message: `must be one of ${(parent.enum ?? []).filter((v) => v !== null).join(', ')}, got ${describe(data)}`,
      };
    case 'const':
      return { message: `must be ${JSON.stringify(parent.const)}, got ${describe(data)}` };
    case 'minItems':
      return {
        message: parent.minItems === 1 ? 'must hold at least one item' : `must hold at least ${parent.minItems} items`,
      };
    case 'maxItems': {
      const length = Array.isArray(data) ? data.length : 0;
      return { message: `holds ${length} items; the most is ${parent.maxItems}` };
    }
    case 'discriminator': {
      const tag = String(params.tag);
      const allowed = (parent.oneOf ?? []).map((s) => s.properties?.[tag]?.const).filter((v) => v !== undefined);
      if (params.tagValue === undefined) return { member: tag, message: `is required (one of ${allowed.join(', ')})` };
      return { member: tag, message: `must be one of ${allowed.join(', ')}, got ${describe(params.tagValue)}` };
    }
    default:
      return { message: error.message ?? `fails the ${error.keyword} rule` };
  }
}

function range(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `must be between ${min} and ${max}`;
  if (min !== undefined) return `must be at least ${min}`;
  return `must be at most ${String(max)}`;
}
