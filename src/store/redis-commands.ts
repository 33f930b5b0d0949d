/** Running Lua scripts and pipelines with errors surfaced, not left inside results. */
import { createHash } from 'node:crypto';
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis.js';

/** A Lua script and its SHA-1, for EVALSHA. */
export interface RedisScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

/** Wraps a script's source with its SHA-1; define each script once, at module level. */
export function defineScript(name: string, lua: string): RedisScript {
  return { name, lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/**
 * Runs a script by EVALSHA, falling back to EVAL (which also caches it) when the server
 * does not know it: after a restart or SCRIPT FLUSH. On Redis Cluster both go to the node
 * that serves the first key's slot (each node has its own script cache); every key must be
 * in that slot, or Redis answers CROSSSLOT.
 */
export async function runScript(
  redis: RedisClient,
  script: RedisScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return await redis.eval(script.lua, keys.length, ...keys, ...args);
  }
}

/** Executes a pipeline or MULTI; throws the first command error instead of returning it. */
export async function execPipeline(pipeline: ChainableCommander): Promise<unknown[]> {
  const results = await pipeline.exec();
  if (results === null) throw new Error('The Redis transaction was aborted.');
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
