#!/usr/bin/env node
import { resolve } from 'node:path';
import {
  ConfigError,
  coerce,
  compileOptions,
  devHttpExecutorAllow,
  isOptionKey,
  optionsFromEnv,
  optionsFromFile,
  type WheelhouseOptions,
} from './lib/config.js';
import { UsageError } from './cli/usage.js';
import { CLIENT_HELP, isClientVerb, runClientVerb } from './cli/verbs.js';
import { LIMITS_HELP, runLimitsVerb } from './cli/limits.js';
import { WORKER_HELP } from './cli/worker-help.js';
import { WheelhouseApiError, WheelhouseNetworkError, WheelhouseTimeoutError } from './client/index.js';
import { isLoopbackHost } from './lib/address-patterns.js';
import { packageVersion } from './lib/version.js';
import { migrate, SchemaTooNewError } from './store/migrate.js';
import { DataDirInUseError } from './store/data-dir-lock.js';

/**
 * `wheelhouse <command> [--flags]`: maps flags to options and calls the entry points.
 * Layers, lowest first: defaults < config file < environment (WHEELHOUSE_*) < flags.
 */
const HELP = `wheelhouse — a distributed job scheduler

Usage:
  wheelhouse dev  [flags]   one node on the embedded default: PGlite under ./.wheelhouse,
                            in-process buckets and queues, HTTP on 127.0.0.1:7070
  wheelhouse node [flags]   a node on Postgres + Redis (config/node.json, WHEELHOUSE_* env);
                            nodes on the same Postgres and Redis form one cluster
  wheelhouse migrate [flags] apply the schema migrations to Postgres (--postgres-url,
                            --postgres-schema) and exit; refuses a schema a newer version migrated
  wheelhouse version        the version of this install (also --version)
  wheelhouse help           this text

Flags (each option also reads WHEELHOUSE_<NAME> from the environment):
  --config <file>           JSON options file (default: config/dev.json or config/node.json)
  --port <n>                HTTP port (default 7070)
  --host <addr>             HTTP address (default 127.0.0.1)
  --node-id <id>            this node's id (default <hostname>-<pid>)
  --data-dir <dir>          embedded data directory (default ./.wheelhouse)
  --postgres-url <url>      default postgres://postgres@127.0.0.1:5432/test
  --redis-url <url>         default redis://127.0.0.1:6379; with --redis-cluster, seed nodes
                            separated by commas
  --redis-cluster           Redis is a Redis Cluster (default: one server)
  --admin-token-file <path> the bootstrap admin key, read from a file (or WHEELHOUSE_ADMIN_TOKEN);
                            with it every route but /healthz, /readyz and /docs needs an API key
  --insecure                let a node listen beyond loopback without an admin key
  --allowed-hosts <list>    host names a node without keys answers besides loopback and its
                            own (names, *.names, addresses, CIDRs; comma-separated)
  --allowed-origins <list>  web origins (https://host:port) that may open the worker channel's
                            WebSocket besides the node's own pages
  --cluster-secret-file <path>  the cluster secret (32 bytes or more) from a file (or
                            WHEELHOUSE_CLUSTER_SECRET); without one a node takes no node-to-node
                            request
  --cluster-secret <s>      the same, on the command line (ps shows it: prefer the file)
  --advertise-url <url>     where other nodes reach this one (default http://<host>:<port>)
  --heartbeat-seconds <n>   membership heartbeat (default 1)
  --failure-timeout-seconds <n>
                            a node silent this long is out of the ring (default 5)
  --log-level <level>       fatal, error, warn, info (default), debug, trace or silent
  --log-format <format>     pretty (one readable line each; the default of dev) or json
                            (one JSON object a line; the default of node)
  --http-executor-allow <list>
                            what wheelhouse.http tasks may call besides public addresses:
                            CIDRs and host names, comma-separated (default none; dev on
                            loopback: 127.0.0.0/8,::1)
  --<option> <value>        any option of src/lib/config.ts in kebab-case, e.g. --partitions 64,
                            --ready-backlog-limit 100000
`;

/**
 * WHEELHOUSE_AUTH_TOKEN was both the clients' key and the node's admin key; a node no longer
 * reads it, and says so when it finds it set (a worker's environment on the node's host).
 */
const AUTH_TOKEN_IGNORED =
  'wheelhouse: WHEELHOUSE_AUTH_TOKEN is set, and a node ignores it: its admin key is WHEELHOUSE_ADMIN_TOKEN ' +
  'or --admin-token-file (clients read their key from WHEELHOUSE_API_KEY)\n';

/** Flags that alone mean true (`--insecure`); each also takes a value (`--insecure false`). */
const SWITCHES = new Set(['insecure', 'redis-cluster']);

/** How long an exit that does not wait for the graceful stop still waits for the database to close. */
const FORCED_CLOSE_MS = 1_000;

export function parseFlags(argv: string[]): { options: WheelhouseOptions; configPath: string | null } {
  const options: Record<string, unknown> = {};
  let configPath: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new ConfigError(arg, 'unexpected argument (flags start with --)');
    const [name, inline] = arg.slice(2).split('=', 2) as [string, string | undefined];
    // A switch: `--insecure` alone means true.
    if (SWITCHES.has(name) && inline === undefined && (argv[i + 1] === undefined || argv[i + 1]?.startsWith('--'))) {
      options[name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())] = true;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new ConfigError(name, 'needs a value');
    if (name === 'config') {
      configPath = value;
      continue;
    }
    const key = name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (!isOptionKey(key)) throw new ConfigError(name, 'is not a known flag (see wheelhouse help)');
    options[key] = coerce(key, value);
  }
  return { options, configPath };
}

export { packageVersion };

// The server (stores, actors, fastify) is loaded only by the commands that run one: the client
// verbs and the worker start in a fraction of the time and memory without it.

async function main(argv: string[]): Promise<void> {
  const [command = 'help', ...rest] = argv;
  if (command === 'help' || command === '--help' || command === '-h' || rest.includes('--help')) {
    process.stdout.write(`${HELP}\n${CLIENT_HELP}\n${LIMITS_HELP}\n${WORKER_HELP}`);
    return;
  }
  if (command === 'version' || command === '--version' || command === '-v') {
    process.stdout.write(`wheelhouse ${packageVersion()}\n`);
    return;
  }
  if (isClientVerb(command)) {
    process.exitCode = await runClientVerb(command, rest, (text) => process.stdout.write(text));
    return;
  }
  if (command === 'limits') {
    process.exitCode = await runLimitsVerb(rest, (text) => process.stdout.write(text), process.env, process.stderr);
    return;
  }
  if (command === 'worker') {
    // The worker SDK (and undici with it) only for this command, not for `dev` or the client verbs.
    const { runWorkerVerb } = await import('./cli/worker.js');
    process.exit(await runWorkerVerb(rest, (text) => process.stderr.write(text)));
  }
  if (command === 'migrate') {
    const flags = parseFlags(rest);
    const file = optionsFromFile(resolve(flags.configPath ?? 'config/node.json'), flags.configPath !== null);
    const options = compileOptions({ ...file, ...optionsFromEnv(), ...flags.options, backend: 'postgres' });
    const { openPostgres } = await import('./store/db.js');
    const db = openPostgres({ url: options.postgresUrl, schema: options.postgresSchema, poolSize: 1 });
    try {
      const applied = await migrate(db, options.postgresSchema);
      process.stdout.write(
        applied.length === 0
          ? `wheelhouse migrate: schema "${options.postgresSchema}" is up to date\n`
          : `wheelhouse migrate: applied ${applied.join(', ')} to schema "${options.postgresSchema}"\n`,
      );
    } finally {
      await db.close();
    }
    return;
  }
  if (command !== 'dev' && command !== 'node') {
    process.stderr.write(`unknown command "${command}"\n\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  const flags = parseFlags(rest);
  if (process.env.WHEELHOUSE_AUTH_TOKEN !== undefined) process.stderr.write(AUTH_TOKEN_IGNORED);
  const file = optionsFromFile(resolve(flags.configPath ?? `config/${command}.json`), flags.configPath !== null);
  const layers: WheelhouseOptions = { ...file, ...optionsFromEnv(), ...flags.options };
  const options: WheelhouseOptions = {
    // A person runs `dev` at a terminal; `node` feeds a log collector. Any layer overrides it.
    logFormat: command === 'dev' ? 'pretty' : 'json',
    // `dev` on loopback lets its HTTP tasks call this machine's loopback (a local hook under test).
    ...(command === 'dev' ? { httpExecutorAllow: devHttpExecutorAllow(layers.host) } : {}),
    ...layers,
    backend: command === 'dev' ? 'embedded' : 'postgres',
  };
  // `dev` is the embedded backend: PGlite on V8's baseline compiler alone (pglite-tier.ts).
  if (command === 'dev') (await import('./store/pglite-tier.js')).choosePgliteTier();
  const { startNode } = await import('./node/start.js');
  const node = await startNode(options);
  process.stdout.write(
    `wheelhouse ${command}: node ${node.options.nodeId} listening on ${node.url} (${node.backend.kind} backend)\n`,
  );
  if (command === 'dev') {
    // For the person who just ran `npm start`: where to go next, without reading the JSON log.
    process.stdout.write(
      `  API:       ${node.url}/api/tasks\n  docs:      ${node.url}/docs\n  dashboard: ${node.url}/admin  (pages: /admin#/cluster, /admin#/tasks, /admin#/queues, /admin#/actors, …)\n`,
    );
    if (!node.services.keys.enabled()) {
      const who = isLoopbackHost(node.options.host) ? 'any process on this machine' : 'anyone who reaches it';
      process.stdout.write(`  keys:      none asked for: ${who} can use every route (docs/security.md)\n`);
    }
  }
  let stopping = false;
  // Leaving before the graceful stop ends: the database is closed first if that is quick (the
  // embedded one writes its shutdown checkpoint and lets its directory go), else it is left as
  // a crash leaves it. Leases and snapshots not handed off are recovered as after a crash.
  const exitNow = (code: number): void => {
    const bound = new Promise((resolveBound) => setTimeout(resolveBound, FORCED_CLOSE_MS).unref());
    void Promise.race([node.backend.db.close().catch(() => undefined), bound]).then(() => process.exit(code));
  };
  const stop = (signal: string): void => {
    if (stopping) {
      // A second signal: the operator will not wait.
      process.stderr.write(`wheelhouse: ${signal} again, exiting now\n`);
      exitNow(130);
      return;
    }
    stopping = true;
    const graceMs = node.options.shutdownGraceMs;
    process.stdout.write(`wheelhouse: ${signal}, shutting down (at most ${graceMs / 1000} s; again to exit now)\n`);
    setTimeout(() => {
      process.stderr.write(`wheelhouse: shutdown took longer than ${graceMs / 1000} s, exiting\n`);
      exitNow(1);
    }, graceMs).unref();
    node.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`wheelhouse: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) {
    const usage = error.usage === undefined ? CLIENT_HELP : error.usage;
    process.stderr.write(`wheelhouse: ${error.message}\n${usage === null ? '' : `\n${usage}`}`);
    process.exit(2);
  }
  if (error instanceof WheelhouseApiError) {
    process.stderr.write(`wheelhouse: ${error.status} ${error.code}: ${error.message}\n`);
    process.exit(1);
  }
  if (error instanceof WheelhouseNetworkError || error instanceof WheelhouseTimeoutError) {
    process.stderr.write(`wheelhouse: ${error.message}\n`);
    process.exit(1);
  }
  if (error instanceof SchemaTooNewError || error instanceof DataDirInUseError) {
    process.stderr.write(`wheelhouse: ${error.message}\n`);
    process.exit(1);
  }
  if (error instanceof ConfigError) {
    process.stderr.write(`wheelhouse: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `wheelhouse: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
