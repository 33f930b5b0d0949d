/**
 * The node's API as the dashboard calls it: same origin, JSON, the API key from the login
 * form as `Authorization: Bearer` on every call. The key lives in sessionStorage: it goes when
 * the tab closes, and no other tab or site sees it (docs/security.md).
 */

const KEY = 'wheelhouse.key';

export function savedKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function saveKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}

/** An answer other than 2xx: the catalogue's code and message (docs/api.md, Errors). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Called when the node refuses the key (401): the app shows the login form again. */
let onUnauthorized: () => void = () => undefined;
export function whenUnauthorized(handler: () => void): void {
  onUnauthorized = handler;
}

/** Calls `path` (with its query) and answers its JSON; throws `ApiError` for any other status. */
export async function api<T>(path: string, method = 'GET', body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const key = savedKey();
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? null : JSON.stringify(body),
    cache: 'no-store',
  });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (res.ok) return parsed as T;
  const error = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
  if (res.status === 401) onUnauthorized();
  throw new ApiError(res.status, error?.code ?? `http_${res.status}`, error?.message ?? res.statusText);
}

/** A query string from the members that are set. */
export function query(params: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== '') q.set(name, String(value));
  }
  const text = q.toString();
  return text.length > 0 ? `?${text}` : '';
}

// ---------------------------------------------------------------------------------------------
// The answers the dashboard reads (the members it uses; docs/api.md has them whole).

export interface Task {
  task_id: string;
  task_type: string;
  status: string;
  schedule_type: string;
  due_time: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  attempts: number;
  max_retries: number;
  priority: number;
  timeout_seconds: number;
  last_error: string | null;
  cancel_requested: boolean;
  dependencies: string[];
  dependencies_satisfied?: number;
  payload: unknown;
  result: unknown;
  progress: unknown;
  progress_at: string | null;
  dag_id?: string;
  ref?: string;
  cron_expression?: string;
  timezone?: string;
  next_due_time?: string | null;
  last_fired_at?: string | null;
  schedule_id?: string;
  fire_time?: string;
}

export interface TaskPage {
  tasks: Task[];
  next_token: string | null;
}

export interface Execution {
  execution_id: string;
  attempt: number;
  status: string;
  due_time: string | null;
  started_at: string | null;
  completed_at: string | null;
  worker_id: string | null;
  error: string | null;
  result: unknown;
}

export interface Explain {
  state: string;
  sentence: string;
  checked_at: string;
}

export interface ClusterStatus {
  node_id: string;
  heartbeat_ms: number | null;
  ring_changes: number;
  nodes: {
    node_id: string;
    url: string;
    state: string;
    live: boolean;
    self: boolean;
    started_at: string | null;
    heartbeat_age_ms: number | null;
    redis_reachable: boolean | null;
  }[];
  ring: { nodes: string[]; vnodes_per_node: number; partitions_per_node: Record<string, number>; spread: string };
  partitions: { partition: number; owner: string; held_by: string | null; epoch: number | null }[];
}

export interface QueueRow {
  task_type: string;
  priority: number;
  depth: number;
  oldest_ready_age_ms: number | null;
}

export interface Dag {
  dag_id: string;
  status: string;
  counts: Record<string, number>;
  tasks: {
    ref: string;
    task_id: string;
    task_type: string;
    status: string;
    depends_on: string[];
    attempts: number;
    last_error: string | null;
  }[];
}

export interface ActorInfo {
  kind: string;
  key: string;
  node: string;
  mailbox_depth: number;
  activated_at: string;
  last_message_at: string | null;
  epoch: number;
  snapshot_version: number | null;
  state?: unknown;
}

export interface ActorPage {
  actors: ActorInfo[];
  next_token?: string | null;
  nodes?: { node_id: string; ok: boolean }[];
}

/** A limit as `GET /api/limits` and `GET /api/limits/{name}` answer it (docs/api.md, Flow control). */
export interface Limit {
  name: string;
  declared_as: string;
  concurrency: number | null;
  rate: { limit: number; period_seconds: number; burst: number } | null;
  on_limit: string;
  weight: number;
  running: number | null;
  waiting: number | null;
  starts_last_period: number | null;
}

export interface LimitPage {
  limits: Limit[];
  next_token: string | null;
}

/** An operation on many tasks as `/api/operations` answers it (docs/api.md, Operations). */
export interface Operation {
  operation_id: string;
  action: 'cancel' | 'retry' | 'delete';
  filter: Record<string, string | number>;
  state: 'running' | 'done' | 'cancelled' | 'failed';
  matched: number;
  done: number;
  failed: number;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

/** `GET /admin/whoami`: what the viewer's key may do. */
export interface WhoAmI {
  keys_enabled: boolean;
  name: string | null;
  scopes: string[];
}

export interface FailureGroup {
  task_type: string;
  error: string;
  count: number;
  newest_failure: string;
  sample_task_id: string;
}

export interface Failures {
  groups: FailureGroup[];
  group_count: number;
  scanned: number;
  scan_limit: number;
}

export interface ConnectedWorker {
  worker_id: string;
  node_id: string;
  transport: 'channel' | 'http';
  task_types: string[];
  credits: number | null;
  leases: number | null;
  connected_since: string;
}

export interface Workers {
  workers: ConnectedWorker[];
  more: number;
  unanswered: string[];
}

let scopesOfKey: { key: string | null; answer: Promise<WhoAmI> } | null = null;

/**
 * What the viewer's key may do, asked once per key: the pages show only the buttons it opens
 * (the node refuses the rest anyway). A node too old to answer is taken to open them all.
 */
export function whoAmI(): Promise<WhoAmI> {
  const key = savedKey();
  if (scopesOfKey === null || scopesOfKey.key !== key) {
    const answer = api<WhoAmI>('/admin/whoami').catch((error: unknown) => {
      if (error instanceof ApiError && error.code === 'route_not_found')
        return { keys_enabled: false, name: null, scopes: ['submit', 'read', 'ops', 'admin'] };
      scopesOfKey = null;
      throw error;
    });
    scopesOfKey = { key, answer };
  }
  return scopesOfKey.answer;
}
