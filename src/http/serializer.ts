import fastJson from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import type { SchemaWarmup } from './schema-warmup.js';
import { SHARED_SCHEMAS } from './schemas/index.js';

/**
 * Answers are serialized from their route's response schema by fast-json-stringify, as fastify
 * does by default, with two differences: a compiled serializer is kept per distinct schema for
 * the life of the process, and it is compiled when the route first answers with that status
 * (or by the warm-up once the server listens, schema-warmup.ts), not as the server starts.
 * Compiling is the slow part (about a millisecond a schema); every
 * route lists the same `Error` answer under several statuses, and tests build hundreds of
 * servers from the same constant schemas (without the cache a server took ~150 ms to be ready,
 * with it ~30 ms); and most of the statuses a route lists are never sent in a node's life
 * (compiling them all took ~0.2 s of the embedded node's start, decision 0047). The contract
 * test compiles every one.
 */

type Serializer = (data: unknown) => string;

const compiled = new Map<string, Serializer>();
const external = Object.fromEntries(SHARED_SCHEMAS.map((s) => [s.$id, s]));

/** The serializer of a response schema, compiled now (or found compiled). */
export function serializerOf(schema: unknown): Serializer {
  const key = JSON.stringify(schema);
  let serialize = compiled.get(key);
  if (serialize === undefined) {
    serialize = fastJson(schema as fastJson.Schema, {
      schema: external as Record<string, fastJson.Schema>,
    });
    compiled.set(key, serialize);
  }
  return serialize;
}

export function serializerCompiler(warmup: SchemaWarmup): FastifySerializerCompiler<TSchema> {
  return ({ schema }) => {
    const compiled = warmup.lazy(() => serializerOf(schema));
    return (data: unknown) => compiled()(data);
  };
}
