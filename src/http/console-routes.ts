import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WheelhouseError } from '../lib/errors.js';
import { uuidv7Ms } from '../lib/ids.js';
import { SCOPES, type ApiKeysApi } from '../services/api-keys.js';
import type { WorkerRoster } from '../services/worker-roster.js';
import type { FailureGroups } from '../store/sql/failures.js';
import { consoleRoutesSchemas as schemas } from './schemas/console.js';
import { parseIsoTime } from './validation/fields.js';

/**
 * What the dashboard's operations console reads besides the task routes (docs/api.md,
 * "Operations console"): which buttons the viewer's key opens (`/admin/whoami`), the failed
 * tasks grouped by type and error (`/admin/failures`, the dead-letter view), the workers
 * connected to every live node (`/admin/workers`), and the newest graphs (`/admin/dags`).
 */
export interface ConsoleApi {
  /** The newest failures (at most `scanRows`) since `sinceMs`, grouped, the largest groups first. */
  failures(query: { sinceMs: number; limit: number; scanRows: number }): Promise<FailureGroups>;
  /** The workers of the live cluster. */
  workers(): Promise<WorkerRoster>;
  /** The ids of the newest `limit` graphs, below `beforeId`, newest first. */
  graphs(limit: number, beforeId?: string): Promise<string[]>;
}

/** Failures one `/admin/failures` reads at most: the bound on its work, whatever the table holds. */
export const FAILURES_SCAN_ROWS = 10_000;

export function consoleRoutes(api: ConsoleApi, keys: Pick<ApiKeysApi, 'enabled'>): FastifyPluginAsync {
  return async (fastify) => {
    const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

    app.get('/admin/whoami', { schema: schemas.whoami }, async (request) => {
      const principal = request.principal;
      if (!keys.enabled() || principal === undefined)
        return { keys_enabled: keys.enabled(), name: null, scopes: [...SCOPES] };
      return { keys_enabled: true, name: principal.name, scopes: [...principal.scopes] };
    });

    app.get('/admin/failures', { schema: schemas.failures }, async (request) => {
      const { since, limit = 100 } = request.query;
      const sinceMs = since === undefined ? 0 : parseIsoTime(since);
      if (sinceMs === null) {
        throw new WheelhouseError('validation_failed', 'since: not an ISO-8601 time', { details: { field: 'since' } });
      }
      const found = await api.failures({ sinceMs, limit, scanRows: FAILURES_SCAN_ROWS });
      return {
        groups: found.groups.map((g) => ({
          task_type: g.taskType,
          error: g.error,
          count: g.count,
          newest_failure: new Date(g.newestMs).toISOString(),
          sample_task_id: g.sampleId,
        })),
        group_count: found.groupCount,
        scanned: found.scanned,
        scan_limit: FAILURES_SCAN_ROWS,
      };
    });

    app.get('/admin/workers', { schema: schemas.workers }, async () => api.workers());

    app.get('/admin/dags', { schema: schemas.graphs }, async (request) => {
      const { limit = 50, before } = request.query;
      const ids = await api.graphs(limit, before?.toLowerCase());
      return {
        dags: ids.map((id) => ({ dag_id: id, created_at: new Date(uuidv7Ms(id) ?? 0).toISOString() })),
        next_before: ids.length === limit ? (ids[ids.length - 1] ?? null) : null,
      };
    });
  };
}
