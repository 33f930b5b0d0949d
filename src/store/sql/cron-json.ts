import type { CronDefinition, CronSchedule } from '../../domain/model.js';

/** The `schedule` column of a cron row (JSONB, API field names), written and read back. */

/** The `schedule` column of a cron row, as the submit path writes it (API field names). */
export function cronDefinitionJson(d: CronDefinition): Record<string, unknown> {
  return {
    cron_expression: d.cronExpression,
    timezone: d.timezone,
    jitter_seconds: d.jitterSeconds,
    misfire_policy: d.misfirePolicy,
    overlap_policy: d.overlapPolicy,
    end_time: d.endMs === null ? null : new Date(d.endMs).toISOString(),
  };
}

/**
 * Definitions read back, shared: 100 000 schedules of a handful of distinct definitions hold
 * a handful of objects (and strings) between them. Treated as immutable.
 */
const definitions = new Map<string, CronDefinition>();
const DEFINITION_CACHE_SIZE = 10_000;

/** The `schedule` column of a new cron row: its definition, generation 0. */
export function cronScheduleJson(d: CronDefinition): Record<string, unknown> {
  return { ...cronDefinitionJson(d), generation: 0 };
}

/** A cron row's `schedule` column read back: definition and generation. */
export function cronScheduleOf(json: Record<string, unknown>): CronSchedule {
  return { definition: cronDefinitionOf(json), generation: typeof json.generation === 'number' ? json.generation : 0 };
}

/** Reads a `schedule` column back. */
export function cronDefinitionOf(json: Record<string, unknown>): CronDefinition {
  const key = `${String(json.cron_expression)}\u0000${String(json.timezone)}\u0000${String(json.jitter_seconds)}\u0000${String(json.misfire_policy)}\u0000${String(json.overlap_policy)}\u0000${String(json.end_time)}`;
  const known = definitions.get(key);
  if (known !== undefined) return known;
  const definition = readDefinition(json);
  if (definitions.size >= DEFINITION_CACHE_SIZE) definitions.clear();
  definitions.set(key, definition);
  return definition;
}

function readDefinition(json: Record<string, unknown>): CronDefinition {
  const end = json.end_time;
  return {
    cronExpression: String(json.cron_expression),
    timezone: typeof json.timezone === 'string' ? json.timezone : 'UTC',
    jitterSeconds: typeof json.jitter_seconds === 'number' ? json.jitter_seconds : 0,
    misfirePolicy:
      json.misfire_policy === 'skip' || json.misfire_policy === 'fire_all' ? json.misfire_policy : 'fire_once',
    overlapPolicy: json.overlap_policy === 'skip' ? 'skip' : 'allow',
    endMs: typeof end === 'string' ? Date.parse(end) : null,
  };
}
