import { readFileSync, existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { isLoopbackHost } from './address-patterns.js';
import {
  ConfigError,
  bool,
  destinations,
  int,
  num,
  oneOf,
  origins,
  redisUrl,
  retention,
  secret,
  str,
} from './option-values.js';

/**
 * Options → compiled options. `compileOptions` fills defaults, converts durations to
 * milliseconds, validates (naming the key on error) and freezes. Layers, lowest first:
 * defaults < `config/<name>.json` < environment (`WHEELHOUSE_*`) < CLI flags.
 */

export type { BackendKind, LogFormat, WheelhouseOptions } from './options.js';
export { ConfigError } from './option-values.js';
import type { BackendKind, LogFormat, WheelhouseOptions } from './options.js';

/** Options after compilation: complete, in milliseconds, frozen. */
export interface CompiledOptions {
  readonly nodeId: string;
  readonly host: string;
  readonly port: number;
  readonly backend: BackendKind;
  readonly dataDir: string;
  readonly postgresUrl: string;
  readonly postgresSchema: string;
  readonly postgresPoolSize: number;
  readonly redisUrl: string;
  readonly redisCluster: boolean;
  readonly redisPrefix: string;
  readonly partitions: number;
  readonly slotMs: number;
  readonly nearWindowMs: number;
  readonly defaultTimeoutSeconds: number;
  /** The start deadline of a task that gives none, seconds; null: none. */
  readonly startDeadlineSeconds: number | null;
  readonly maxPayloadBytes: number;
  readonly maxResultBytes: number;
  readonly readyBacklogLimit: number;
  readonly pollMaxTaskTypes: number;
  readonly pollMaxConcurrent: number;
  readonly workerHeartbeatMs: number;
  readonly workerSocketsMax: number;
  readonly workerHelloTimeoutMs: number;
  readonly metricsTaskTypesMax: number;
  readonly workerFrameMaxBytes: number;
  readonly maxDependencies: number;
  readonly maxPageBytes: number;
  readonly maxJsonDepth: number;
  readonly listScanRows: number;
  readonly operationPageTasks: number;
  readonly listTimeoutMs: number;
  readonly listPoolSize: number;
  readonly cronCheckBudgetMs: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly pollMaxWaitMs: number;
  readonly inflightTimeoutMs: number;
  readonly cronMisfireThresholdMs: number;
  readonly cronFireAllLimit: number;
  readonly cronAdvanceSpreadMs: number;
  readonly cronAwakeIntervalMs: number;
  readonly dagSweepMs: number;
  readonly dagIdlePassivationMs: number;
  readonly limitIdleMs: number;
  readonly safetyNetMs: number;
  readonly safetyNetGraceMs: number;
  readonly retentionMs: number;
  readonly statsRetentionMs: number;
  readonly statsFlushMs: number;
  readonly testClockOffsetMs: number;
  readonly testClockStepFile: string | null;
  /** The bootstrap admin key (`adminToken` or the contents of `adminTokenFile`). */
  readonly adminToken: string | null;
  readonly insecure: boolean;
  readonly allowedHosts: readonly string[];
  /** `allowedOrigins`, each as its origin (`https://host[:port]`, lower case). */
  readonly allowedOrigins: readonly string[];
  /** `clusterSecret` or the contents of `clusterSecretFile`. */
  readonly clusterSecret: string | null;
  readonly shutdownGraceMs: number;
  readonly advertiseUrl: string | null;
  readonly heartbeatMs: number;
  readonly failureTimeoutMs: number;
  readonly builtinExecutors: boolean;
  readonly httpExecutorAllow: readonly string[];
  readonly httpExecutorMaxResponseBytes: number;
  readonly httpExecutorTimeoutMs: number;
  readonly httpExecutorConnectionsPerDestination: number;
  readonly logLevel: string;
  readonly logFormat: LogFormat;
}

/**
 * The ceilings of the per-request bounds: what the route schemas hold every request to, whatever
 * the configuration (which may only set the bound lower).
 */
export const MAX_POLL_TASK_TYPES = 1000;
export const MAX_DEPENDENCIES = 10_000;
export const MAX_JSON_DEPTH = 1000;

/**
 * `authToken` was the admin key's former name, and WHEELHOUSE_AUTH_TOKEN was also the key the
 * CLI and workers send: a worker's environment on a node's host made its `work` key the node's
 * admin key. A node reads neither now (docs/security.md).
 */
const AUTH_TOKEN_GONE =
  'is no longer read by a node: its admin key is adminToken (WHEELHOUSE_ADMIN_TOKEN) or adminTokenFile ' +
  '(--admin-token-file); WHEELHOUSE_API_KEY is the key clients send';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const LOG_FORMATS: readonly LogFormat[] = ['pretty', 'json'];

/** Fills defaults, validates and freezes. Throws `ConfigError` naming the first bad key. */
export function compileOptions(options: WheelhouseOptions = {}): CompiledOptions {
  const known = new Set(Object.keys(DEFAULTS));
  for (const key of Object.keys(options)) {
    if (key === 'authToken') throw new ConfigError(key, AUTH_TOKEN_GONE);
    if (!known.has(key)) throw new ConfigError(key, 'is not a known option');
  }
  const o = { ...DEFAULTS, ...stripUndefined(options) };
  const backend = oneOf('backend', o.backend, ['embedded', 'postgres'] as const);
  const compiled: CompiledOptions = {
    nodeId: str('nodeId', o.nodeId, /^[A-Za-z0-9_.:-]{1,64}$/),
    host: str('host', o.host),
    port: int('port', o.port, 0, 65535),
    backend,
    dataDir: str('dataDir', o.dataDir),
    postgresUrl: str('postgresUrl', o.postgresUrl),
    postgresSchema: str('postgresSchema', o.postgresSchema, /^[a-z_][a-z0-9_]{0,62}$/),
    postgresPoolSize: int('postgresPoolSize', o.postgresPoolSize, 1, 1000),
    redisUrl: redisUrl(o.redisUrl, o.redisCluster),
    redisCluster: bool('redisCluster', o.redisCluster),
    redisPrefix: str('redisPrefix', o.redisPrefix, /^[A-Za-z0-9_.:-]{1,64}$/),
    partitions: int('partitions', o.partitions, 1, 4096),
    slotMs: int('slotMs', o.slotMs, 1, 1000),
    nearWindowMs: int('nearWindowSeconds', o.nearWindowSeconds, 1, 3600) * 1000,
    defaultTimeoutSeconds: int('defaultTimeoutSeconds', o.defaultTimeoutSeconds, 1, 86_400),
    startDeadlineSeconds: int('startDeadlineSeconds', o.startDeadlineSeconds, 0, 7 * 86_400) || null,
    maxPayloadBytes: int('maxPayloadBytes', o.maxPayloadBytes, 1024, 64 * 1024 * 1024),
    maxResultBytes: int('maxResultBytes', o.maxResultBytes, 1024, 64 * 1024 * 1024),
    readyBacklogLimit: int('readyBacklogLimit', o.readyBacklogLimit, 1, Number.MAX_SAFE_INTEGER),
    pollMaxTaskTypes: int('pollMaxTaskTypes', o.pollMaxTaskTypes, 1, MAX_POLL_TASK_TYPES),
    pollMaxConcurrent: int('pollMaxConcurrent', o.pollMaxConcurrent, 1, 1_000_000),
    workerHeartbeatMs: num('workerHeartbeatSeconds', o.workerHeartbeatSeconds, 0.05, 600) * 1000,
    workerSocketsMax: int('workerSocketsMax', o.workerSocketsMax, 1, 1_000_000),
    workerHelloTimeoutMs: num('workerHelloTimeoutSeconds', o.workerHelloTimeoutSeconds, 0.05, 3600) * 1000,
    metricsTaskTypesMax: int('metricsTaskTypesMax', o.metricsTaskTypesMax, 1, 100_000),
    workerFrameMaxBytes: int('workerFrameMaxBytes', o.workerFrameMaxBytes, 1024, 1024 * 1024 * 1024),
    maxDependencies: int('maxDependencies', o.maxDependencies, 1, MAX_DEPENDENCIES),
    maxPageBytes: int('maxPageBytes', o.maxPageBytes, 1024, 1024 * 1024 * 1024),
    maxJsonDepth: int('maxJsonDepth', o.maxJsonDepth, 2, MAX_JSON_DEPTH),
    listScanRows: int('listScanRows', o.listScanRows, 100, 10_000_000),
    operationPageTasks: int(
      'operationPageTasks',
      options.operationPageTasks ?? (backend === 'embedded' ? EMBEDDED_OPERATION_PAGE_TASKS : o.operationPageTasks),
      1,
      100_000,
    ),
    listTimeoutMs: num('listTimeoutSeconds', o.listTimeoutSeconds, 0.01, 3600) * 1000,
    listPoolSize: int('listPoolSize', o.listPoolSize, 1, 100),
    cronCheckBudgetMs: num('cronCheckBudgetSeconds', o.cronCheckBudgetSeconds, 0.001, 60) * 1000,
    retryBaseMs: num('retryBaseSeconds', o.retryBaseSeconds, 0, 86_400) * 1000,
    retryMaxMs: num('retryMaxSeconds', o.retryMaxSeconds, 0, 7 * 86_400) * 1000,
    pollMaxWaitMs: num('pollMaxWaitSeconds', o.pollMaxWaitSeconds, 0, 300) * 1000,
    inflightTimeoutMs: num('inflightTimeoutSeconds', o.inflightTimeoutSeconds, 1, 3600) * 1000,
    cronMisfireThresholdMs: num('cronMisfireThresholdSeconds', o.cronMisfireThresholdSeconds, 0, 7 * 86_400) * 1000,
    cronFireAllLimit: int('cronFireAllLimit', o.cronFireAllLimit, 1, 10_000),
    cronAdvanceSpreadMs: num('cronAdvanceSpreadSeconds', o.cronAdvanceSpreadSeconds, 0, 3600) * 1000,
    cronAwakeIntervalMs: num('cronAwakeIntervalSeconds', o.cronAwakeIntervalSeconds, 0, 3600) * 1000,
    dagSweepMs: num('dagSweepSeconds', o.dagSweepSeconds, 0.1, 86_400) * 1000,
    dagIdlePassivationMs: num('dagIdlePassivationSeconds', o.dagIdlePassivationSeconds, 0.01, 3600) * 1000,
    limitIdleMs: num('limitIdleSeconds', o.limitIdleSeconds, 0.01, 3600) * 1000,
    safetyNetMs: num('safetyNetSeconds', o.safetyNetSeconds, 0.05, 3600) * 1000,
    safetyNetGraceMs: num('safetyNetGraceSeconds', o.safetyNetGraceSeconds, 0.05, 86_400) * 1000,
    retentionMs: retention(o.retentionSeconds) * 1000,
    statsRetentionMs: num('statsRetentionDays', o.statsRetentionDays, 1 / 24, 3660) * 86_400_000,
    statsFlushMs: num('statsFlushSeconds', o.statsFlushSeconds, 0.05, 3600) * 1000,
    testClockOffsetMs: Math.round(num('testClockOffsetSeconds', o.testClockOffsetSeconds, -86_400, 86_400) * 1000),
    testClockStepFile: o.testClockStepFile === null ? null : str('testClockStepFile', o.testClockStepFile),
    adminToken: secret('adminToken', o.adminToken, o.adminTokenFile, 16),
    insecure: bool('insecure', o.insecure),
    allowedHosts: destinations('allowedHosts', o.allowedHosts),
    allowedOrigins: origins('allowedOrigins', o.allowedOrigins),
    clusterSecret: secret('clusterSecret', o.clusterSecret, o.clusterSecretFile, 32),
    shutdownGraceMs: num('shutdownGraceSeconds', o.shutdownGraceSeconds, 0.1, 3600) * 1000,
    advertiseUrl: o.advertiseUrl === null ? null : str('advertiseUrl', o.advertiseUrl, /^https?:\/\/[^\s/]+$/),
    heartbeatMs: num('heartbeatSeconds', o.heartbeatSeconds, 0.05, 60) * 1000,
    failureTimeoutMs: num('failureTimeoutSeconds', o.failureTimeoutSeconds, 0.1, 600) * 1000,
    builtinExecutors: bool('builtinExecutors', o.builtinExecutors),
    httpExecutorAllow: destinations('httpExecutorAllow', o.httpExecutorAllow),
    httpExecutorMaxResponseBytes: int(
      'httpExecutorMaxResponseBytes',
      o.httpExecutorMaxResponseBytes,
      1024,
      64 * 1024 * 1024,
    ),
    httpExecutorTimeoutMs: num('httpExecutorTimeoutSeconds', o.httpExecutorTimeoutSeconds, 0.1, 86_400) * 1000,
    httpExecutorConnectionsPerDestination: int(
      'httpExecutorConnectionsPerDestination',
      o.httpExecutorConnectionsPerDestination,
      1,
      1000,
    ),
    logLevel: oneOf('logLevel', o.logLevel, LOG_LEVELS),
    logFormat: oneOf('logFormat', o.logFormat, LOG_FORMATS),
  };
  if (compiled.heartbeatMs * 2 > compiled.failureTimeoutMs) {
    throw new ConfigError('heartbeatSeconds', 'must be at most half of failureTimeoutSeconds');
  }
  if (compiled.safetyNetGraceMs < compiled.failureTimeoutMs) {
    throw new ConfigError(
      'safetyNetGraceSeconds',
      "must be at least failureTimeoutSeconds (a dead node's leases are its successor's to recover first)",
    );
  }
  if (compiled.retryMaxMs < compiled.retryBaseMs) {
    throw new ConfigError('retryMaxSeconds', 'must be at least retryBaseSeconds');
  }
  return Object.freeze(compiled);
}

/**
 * `operationPageTasks` on the embedded default (200 on Postgres). PGlite runs a statement on
 * the node's own thread, so a page holds every submit and claim for as long as it takes: pages
 * of 1 000 were ~280 ms each, and a bulk retry's submit p99 went to 29× idle; pages of 20
 * (~7 ms with the page's other statements) kept it within 2× (decision 0048).
 */
export const EMBEDDED_OPERATION_PAGE_TASKS = 20;

const DEFAULTS: Required<WheelhouseOptions> = {
  nodeId: `${hostname()
    .replace(/[^A-Za-z0-9_.:-]/g, '-')
    .slice(0, 40)}-${process.pid}`,
  host: '127.0.0.1',
  port: 7070,
  backend: 'embedded',
  dataDir: './.wheelhouse',
  postgresUrl: 'postgres://postgres@127.0.0.1:5432/test',
  postgresSchema: 'wheelhouse',
  postgresPoolSize: 10,
  redisUrl: 'redis://127.0.0.1:6379',
  redisCluster: false,
  redisPrefix: 'wh',
  partitions: 64,
  slotMs: 10,
  nearWindowSeconds: 60,
  defaultTimeoutSeconds: 60,
  startDeadlineSeconds: 0,
  maxPayloadBytes: 256 * 1024,
  maxResultBytes: 64 * 1024,
  readyBacklogLimit: 1_000_000,
  pollMaxTaskTypes: 100,
  pollMaxConcurrent: 1000,
  workerHeartbeatSeconds: 5,
  workerSocketsMax: 10_000,
  workerHelloTimeoutSeconds: 10,
  metricsTaskTypesMax: 100,
  workerFrameMaxBytes: 16 * 1024 * 1024,
  maxDependencies: 1000,
  maxPageBytes: 8 * 1024 * 1024,
  maxJsonDepth: 64,
  listScanRows: 10_000,
  operationPageTasks: 200,
  listTimeoutSeconds: 5,
  listPoolSize: 2,
  cronCheckBudgetSeconds: 0.5,
  retryBaseSeconds: 1,
  retryMaxSeconds: 3600,
  pollMaxWaitSeconds: 30,
  inflightTimeoutSeconds: 30,
  cronMisfireThresholdSeconds: 60,
  cronFireAllLimit: 100,
  cronAdvanceSpreadSeconds: 30,
  cronAwakeIntervalSeconds: 2,
  dagSweepSeconds: 60,
  dagIdlePassivationSeconds: 5,
  limitIdleSeconds: 30,
  safetyNetSeconds: 5,
  safetyNetGraceSeconds: 10,
  retentionSeconds: 7 * 86_400,
  statsRetentionDays: 7,
  statsFlushSeconds: 10,
  testClockOffsetSeconds: 0,
  testClockStepFile: null,
  adminToken: null,
  adminTokenFile: null,
  insecure: false,
  allowedHosts: [],
  allowedOrigins: [],
  clusterSecret: null,
  clusterSecretFile: null,
  shutdownGraceSeconds: 30,
  advertiseUrl: null,
  heartbeatSeconds: 1,
  failureTimeoutSeconds: 5,
  builtinExecutors: true,
  httpExecutorAllow: [],
  httpExecutorMaxResponseBytes: 64 * 1024,
  httpExecutorTimeoutSeconds: 60,
  httpExecutorConnectionsPerDestination: 8,
  logLevel: 'info',
  logFormat: 'json',
};

/** Environment variable for each option: `WHEELHOUSE_` + the key in SCREAMING_SNAKE. */
export function envName(key: string): string {
  return `WHEELHOUSE_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** Reads the options set in the environment, as strings converted to the option's type. */
export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): WheelhouseOptions {
  const out: Record<string, unknown> = {};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const raw = env[envName(key)];
    if (raw === undefined) continue;
    out[key] = coerce(key, raw, fallback);
  }
  return out;
}

/** Reads `config/<name>.json` (or a path). Missing default file: no options. */
export function optionsFromFile(path: string, required = false): WheelhouseOptions {
  if (!existsSync(path)) {
    if (required) throw new ConfigError('config', `file ${path} does not exist`);
    return {};
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError('config', `file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('config', `file ${path} must hold a JSON object`);
  }
  return parsed;
}

/** The options that hold a secret or name its file: never empty (see `coerce`). */
const SECRET_KEYS: ReadonlySet<string> = new Set([
  'adminToken',
  'adminTokenFile',
  'clusterSecret',
  'clusterSecretFile',
]);

/** Converts a string flag or variable to the type of the option's default. */
export function coerce(
  key: string,
  raw: string,
  fallback: unknown = (DEFAULTS as Record<string, unknown>)[key],
): unknown {
  if (typeof fallback === 'number') {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new ConfigError(key, `"${raw}" is not a number`);
    return n;
  }
  if (typeof fallback === 'boolean') {
    if (['true', '1', 'yes'].includes(raw)) return true;
    if (['false', '0', 'no'].includes(raw)) return false;
    throw new ConfigError(key, `"${raw}" is not a boolean`);
  }
  if (fallback === null && (raw === '' || raw === 'null')) {
    // An unset variable that expanded to nothing must not turn auth off: a secret is given or
    // left out, never given empty.
    if (SECRET_KEYS.has(key))
      throw new ConfigError(key, `is ${raw === '' ? 'empty' : '"null"'}; leave it unset for none`);
    return null;
  }
  return raw;
}

export function isOptionKey(key: string): key is keyof WheelhouseOptions {
  return Object.hasOwn(DEFAULTS, key);
}

function stripUndefined(o: WheelhouseOptions): WheelhouseOptions {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/**
 * `wheelhouse dev`'s default for `httpExecutorAllow`, given the address it listens on: loopback
 * while that is loopback — who can submit tasks then is on this machine, and reaches its
 * loopback services anyway — and nothing more than `wheelhouse node` otherwise.
 */
export function devHttpExecutorAllow(host: string | undefined): readonly string[] {
  return isLoopbackHost(host ?? DEFAULTS.host) ? ['127.0.0.0/8', '::1'] : [];
}
