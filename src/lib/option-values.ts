import { readFileSync } from 'node:fs';
import { parseDestinationPattern } from './address-patterns.js';

/**
 * The checks of single option values: each takes the key and the raw value (from a file, the
 * environment or a flag), answers the value typed, or throws `ConfigError` naming the key and
 * what is wrong. `compileOptions` (config.ts) applies them.
 */

export class ConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(`config ${key}: ${message}`);
    this.name = 'ConfigError';
  }
}

/**
 * A secret from its option or from a file, at least `minBytes` long. An empty one is an error,
 * not "no secret": an unset variable that expanded to nothing must not turn auth off.
 */
export function secret(key: string, value: string | null, file: string | null, minBytes: number): string | null {
  if (value !== null && file !== null) throw new ConfigError(key, `give ${key} or ${key}File, not both`);
  let text = value;
  if (file !== null) {
    try {
      text = readFileSync(str(`${key}File`, file), 'utf8').trim();
    } catch (error) {
      throw new ConfigError(`${key}File`, `cannot read ${file}: ${(error as Error).message}`);
    }
  }
  if (text === null) return null;
  if (typeof text !== 'string') throw new ConfigError(key, 'must be a string');
  if (text.length === 0) throw new ConfigError(key, 'is empty; leave it unset for none');
  if (Buffer.byteLength(text) < minBytes) {
    throw new ConfigError(key, `must be at least ${minBytes} bytes (it is ${Buffer.byteLength(text)})`);
  }
  return text;
}

export function str(key: string, value: unknown, pattern?: RegExp): string {
  if (typeof value !== 'string' || value.length === 0) throw new ConfigError(key, 'must be a non-empty string');
  if (pattern && !pattern.test(value)) throw new ConfigError(key, `"${value}" must match ${pattern}`);
  return value;
}

export function num(key: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new ConfigError(key, 'must be a number');
  if (value < min || value > max) throw new ConfigError(key, `${value} must be between ${min} and ${max}`);
  return value;
}

/** The longest retention: ten years (longer is the same as keeping everything). */
const MAX_RETENTION_SECONDS = 3650 * 86_400;

/** `retentionSeconds`: more than 0; 0 would remove a task as it ends, before anyone read its outcome. */
export function retention(value: unknown): number {
  const key = 'retentionSeconds';
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new ConfigError(key, 'must be a number of seconds');
  if (value <= 0) {
    throw new ConfigError(
      key,
      `${value} must be more than 0: it is how long a finished task is kept (the default is 604800, 7 days)`,
    );
  }
  if (value > MAX_RETENTION_SECONDS) {
    throw new ConfigError(key, `${value} must be at most ${MAX_RETENTION_SECONDS} (ten years)`);
  }
  return value;
}

export function int(key: string, value: unknown, min: number, max: number): number {
  const n = num(key, value, min, max);
  if (!Number.isInteger(n)) throw new ConfigError(key, `${n} must be an integer`);
  return n;
}

export function bool(key: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(key, 'must be true or false');
  return value;
}

/**
 * An allow-list of destinations (see `httpExecutorAllow`): a list, or one string of entries
 * separated by commas or spaces (as the environment and flags give it), each checked.
 */
export function destinations(key: string, value: unknown): readonly string[] {
  const entries = typeof value === 'string' ? value.split(/[\s,]+/).filter((e) => e !== '') : value;
  if (!Array.isArray(entries)) throw new ConfigError(key, 'must be a list of CIDRs and host names');
  for (const entry of entries as unknown[]) {
    if (typeof entry !== 'string' || parseDestinationPattern(entry) === null) {
      throw new ConfigError(key, `${JSON.stringify(entry)} is not a CIDR, an IP address or a host name`);
    }
  }
  return Object.freeze([...(entries as string[])]);
}

/**
 * A list of web origins (`https://host[:port]`): a list, or one string of entries separated by
 * commas or spaces. Each is kept as its origin (lower case, without a default port).
 */
export function origins(key: string, value: unknown): readonly string[] {
  const entries = typeof value === 'string' ? value.split(/[\s,]+/).filter((e) => e !== '') : value;
  if (!Array.isArray(entries)) throw new ConfigError(key, 'must be a list of origins (https://host[:port])');
  return Object.freeze(
    (entries as unknown[]).map((entry) => {
      let url: URL | null = null;
      try {
        url = typeof entry === 'string' ? new URL(entry) : null;
      } catch {
        url = null;
      }
      const bare = url !== null && `${url.origin}/` === url.href;
      if (url === null || !['http:', 'https:'].includes(url.protocol) || !bare) {
        throw new ConfigError(key, `${JSON.stringify(entry)} is not an origin (http(s)://host[:port], no path)`);
      }
      return url.origin;
    }),
  );
}

/**
 * `redisUrl`: one URL, or with `redisCluster` a list of seed nodes separated by commas, each
 * `redis://host:port` or `rediss://host:port`.
 */
export function redisUrl(value: unknown, cluster: unknown): string {
  const url = str('redisUrl', value);
  if (cluster !== true) return url;
  const seeds = url.split(',').map((seed) => seed.trim());
  for (const seed of seeds) {
    if (!/^rediss?:\/\/[^\s/,]+/.test(seed)) {
      throw new ConfigError('redisUrl', `${JSON.stringify(seed)} is not a seed node (redis://host:port)`);
    }
  }
  return url;
}

export function oneOf<T extends string>(key: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !allowed.includes(value as T)) {
    throw new ConfigError(key, `must be one of ${allowed.join(', ')}`);
  }
  return value as T;
}
