import fastJson from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';
import type { TSchema } from 'typebox';
import { SHARED_SCHEMAS } from './schemas/index.js';

/**
 * Answers are serialized from their route's response schema by fast-json-stringify, as fastify
 * does by default, with one difference: a compiled serializer is kept per distinct schema for
 * the life of the process. Compiling is the slow part (about a millisecond a schema), every
 * route lists the same `Error` answer under several statuses, and tests build hundreds of
 * servers from the same constant schemas; without the cache a server took ~150 ms to be ready,
 * with it ~30 ms.
 */

type Serializer = (data: unknown) => string;

const compiled = new Map<string, Serializer>();
const external = Object.fromEntries(SHARED_SCHEMAS.map((s) => [s.$id, s]));

export const serializerCompiler: FastifySerializerCompiler<TSchema> = ({ schema }) => {
  const key = JSON.stringify(schema);
  let serialize = compiled.get(key);
  if (serialize === undefined) {
    serialize = fastJson(schema as fastJson.Schema, {
      schema: external as Record<string, fastJson.Schema>,
    });
    compiled.set(key, serialize);
  }
  return serialize;
};
