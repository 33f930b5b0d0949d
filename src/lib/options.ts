/**
 * The options a user writes, in any layer (`config/<name>.json`, `WHEELHOUSE_*`, CLI flags),
 * each with its meaning and default. `compileOptions` (config.ts) turns them into the node's
 * `CompiledOptions`.
 */

export type BackendKind = 'embedded' | 'postgres';

/** How log lines are written (see `WheelhouseOptions.logFormat`). */
export type LogFormat = 'pretty' | 'json';

/** Options as a user writes them, in any layer. All optional. */
export interface WheelhouseOptions {
  /** This node's id in the cluster. @default `<hostname>-<pid>` */
  nodeId?: string;
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 7070 */
  port?: number;
  /** `embedded`: PGlite + in-process buckets; `postgres`: Postgres + Redis. @default 'embedded' */
  backend?: BackendKind;
  /** Where the embedded backend keeps its data. @default './.wheelhouse' */
  dataDir?: string;
  /** @default 'postgres://postgres@127.0.0.1:5432/test' */
  postgresUrl?: string;
  /** The Postgres schema Wheelhouse's tables live in. @default 'wheelhouse' */
  postgresSchema?: string;
  /**
   * Postgres connections in all, split in two pools: half for submissions and reads
   * (synchronous commit), half for claims and results (asynchronous commit). @default 10
   */
  postgresPoolSize?: number;
  /**
   * Where Redis is. With `redisCluster`, one or more seed nodes of the cluster, separated by
   * commas (`redis://10.0.0.1:7000,redis://10.0.0.2:7000`); the user name, password and scheme
   * (`rediss:` for TLS) of the first apply to every node. @default 'redis://127.0.0.1:6379'
   */
  redisUrl?: string;
  /**
   * Redis is a Redis Cluster: the node connects with a cluster client (slot map, MOVED/ASK
   * redirections, failover) and keeps its ready queues per wheel partition, each partition's
   * keys in one slot (docs/decisions/0017-redis-cluster.md). Every node of a deployment must
   * say the same. @default false
   */
  redisCluster?: boolean;
  /** Prefix of every Redis key. @default 'wh' */
  redisPrefix?: string;
  /** Number of wheel partitions. Fixed for the life of a deployment. @default 64 */
  partitions?: number;
  /** Width of a near-wheel slot, ms. @default 10 */
  slotMs?: number;
  /** How far ahead the near wheel holds tasks in memory, seconds. @default 60 */
  nearWindowSeconds?: number;
  /** The execution deadline of an attempt when its task gives no `timeout_seconds`, seconds. @default 60 */
  defaultTimeoutSeconds?: number;
  /**
   * The start deadline of a task that gives no `start_deadline_seconds`: not started that long
   * after its due time, it ends `expired`. Seconds; 0: none. @default 0
   */
  startDeadlineSeconds?: number;
  /** Largest accepted request body, bytes. @default 262144 (256 KiB) */
  maxPayloadBytes?: number;
  /**
   * Largest task result, and largest progress update, a worker may report: bytes of its JSON.
   * More is a 400 naming the field. @default 65536 (64 KiB)
   */
  maxResultBytes?: number;
  /** Ready backlog past which submissions get 429. @default 1000000 */
  readyBacklogLimit?: number;
  // Bounds on the work one request can cause: each is answered with a 4xx of the catalogue (or,
  // for a page, a page that stops early), never with a node held up for everyone else.
  /** Most task types one poll may name (`task_types`); more is a 400. At most 1000. @default 100 */
  pollMaxTaskTypes?: number;
  /** Long-polls this node holds at once; one more is answered 429 `too_many_polls` with Retry-After. @default 1000 */
  pollMaxConcurrent?: number;
  /**
   * How often the node pings each worker socket (a socket that misses a pong is closed) and
   * says so in `welcome.heartbeat_ms`. @default 5
   */
  workerHeartbeatSeconds?: number;
  /**
   * Worker sockets this node holds at once; one more is refused with `too_many_sockets`. They
   * also count against `pollMaxConcurrent` with the long-polls (decision 0021). @default 10000
   */
  workerSocketsMax?: number;
  /** A worker socket that has not said `hello` this long after it opened is closed. @default 10 */
  workerHelloTimeoutSeconds?: number;
  /**
   * Distinct `task_type` label values of each task metric on `/metrics`: the first task types
   * a node meets keep their name, the others are counted as `other`. @default 100
   */
  metricsTaskTypesMax?: number;
  /** Largest frame a worker may send, bytes; a larger one closes its socket. @default 16777216 (16 MiB) */
  workerFrameMaxBytes?: number;
  /** Most dependencies of one task (`dependencies`, or a graph task's `depends_on`); more is a 400. @default 1000 */
  maxDependencies?: number;
  /**
   * A list page or a poll answer stops adding tasks once their JSON passes this many bytes (it
   * always holds one); a list page then carries `next_token`. @default 8388608 (8 MiB)
   */
  maxPageBytes?: number;
  /** Deepest nesting of arrays and objects in a request body; deeper is a 400. @default 64 */
  maxJsonDepth?: number;
  /**
   * Rows one list page walks (newest first) when it filters by status or task type, which have
   * no index of their own: the page stops there, with a `next_token` to go on. @default 10000
   */
  listScanRows?: number;
  /**
   * Tasks one page of an operation on many tasks walks by id, in one transaction. @default 200
   * on Postgres, 20 on the embedded default (each page holds its one connection and thread)
   */
  operationPageTasks?: number;
  /** Statement timeout of a listing on Postgres, seconds (past it: 503). @default 5 */
  listTimeoutSeconds?: number;
  /** Postgres connections of the listings' own pool, besides `postgresPoolSize`. @default 2 */
  listPoolSize?: number;
  /**
   * Time the cron checks of one submission may take (first fire time, jitter against the
   * shortest interval), seconds: a rule whose fire times are not found within it is a 400
   * `invalid_cron`. @default 0.5
   */
  cronCheckBudgetSeconds?: number;
  /** First retry delay, seconds. @default 1 */
  retryBaseSeconds?: number;
  /** Longest retry delay, seconds. @default 3600 */
  retryMaxSeconds?: number;
  /** Longest long-poll, seconds. @default 30 */
  pollMaxWaitSeconds?: number;
  /** An entry taken from a ready queue but not settled for this long is put back, seconds. @default 30 */
  inflightTimeoutSeconds?: number;
  /**
   * A cron instance overdue by more than this is a misfire (the node was down, the schedule
   * failed over) and the schedule's misfire policy applies; less is only late, and every
   * fire time in it still gets its instance. Seconds. @default 60
   */
  cronMisfireThresholdSeconds?: number;
  /** The most missed fire times `misfire_policy: fire_all` catches up at once (the latest ones). @default 100 */
  cronFireAllLimit?: number;
  /**
   * After an instance fires, its schedule creates the next one within this many seconds (at
   * most half the interval; an offset fixed per schedule), so that aligned schedules do not
   * all write at the instant their instances are claimed. 0: at once. @default 30
   */
  cronAdvanceSpreadSeconds?: number;
  /**
   * A cron schedule whose fire times are at most this many seconds apart keeps its actor in
   * memory between fires, on its own timer; a sparser one leaves memory after each fire and
   * its wheel partition wakes it for the next, so a node's memory does not grow with the
   * number of schedules. 0: every schedule leaves memory between fires. @default 2
   */
  cronAwakeIntervalSeconds?: number;
  /**
   * How often the node checks that no blocked task was left behind: a page-by-page pass over
   * the tasks waiting on predecessors (it should find none; what it finds is counted).
   * Seconds. @default 60
   */
  dagSweepSeconds?: number;
  /** Idle time after which a DAG node's actor (a blocked task) leaves memory, seconds (at least 0.01). @default 5 */
  dagIdlePassivationSeconds?: number;
  /**
   * Idle time after which a limit key's actor that still holds something (a permit out, a task
   * admitted or waiting) leaves memory, seconds (at least 0.01); one that holds nothing leaves
   * after 2 s, or sooner if this is less (decision 0026). A rate key stays at least until its
   * last start has left the rate's period. @default 30
   */
  limitIdleSeconds?: number;
  /**
   * How often the safety nets look for tasks their mechanism left behind in the partitions
   * this node owns: running tasks whose lease ran out, and pending tasks overdue that
   * nothing holds (they should find none; what they find is handed on and counted).
   * Seconds. @default 5
   */
  safetyNetSeconds?: number;
  /**
   * How long past its lease expiry or due time a task must be before the safety nets take
   * it: longer than the mechanisms need even across a failover (failure timeout plus a
   * takeover). Seconds; at least the failure timeout. @default 10
   */
  safetyNetGraceSeconds?: number;
  /**
   * How long a finished task (succeeded, failed, cancelled) is kept after it ended, seconds.
   * Then it is removed with its executions, in bounded batches, by the node that owns its
   * wheel partition; reading it answers 404 saying it passed retention. A task of a graph
   * stays until the whole graph has finished and passed it; one whose idempotency key is
   * live stays until the key expires. Unfinished tasks and live schedules are never removed.
   * More than 0. @default 604800 (7 days)
   */
  retentionSeconds?: number;
  /**
   * How long the task activity history (`task_stats`: counts per minute, task type and node,
   * read by `GET /admin/stats` and the dashboard's Activity page) is kept, days. @default 7
   */
  statsRetentionDays?: number;
  /**
   * How often a node adds what it counted of task activity to `task_stats`, seconds: one
   * statement per flush whatever the task rate. What the page shows lags by up to this much.
   * @default 10
   */
  statsFlushSeconds?: number;
  /**
   * For tests of clock skew only: this node's own clock reads this many seconds ahead (or
   * behind, negative). A Postgres node measures and corrects it (it reads time as the
   * database does). @default 0
   */
  testClockOffsetSeconds?: number;
  /**
   * For tests of clock steps only: a file holding a number of seconds. Whenever its contents
   * change, this node's own clock is stepped to read that many seconds ahead (negative:
   * behind), on top of `testClockOffsetSeconds` — as when an operator or NTP steps a running
   * machine's clock. @default null
   */
  testClockStepFile?: string | null;
  /**
   * The bootstrap admin key: a bearer secret with every scope (docs/security.md). With it, or
   * once any key was made through `/admin/tokens`, every route but the open ones needs a key.
   * Better given as a file (`adminTokenFile`) or the environment (WHEELHOUSE_ADMIN_TOKEN) than a
   * flag, which `ps` shows. @default null
   */
  adminToken?: string | null;
  /** A file holding the admin key (whitespace around it is dropped). @default null */
  adminTokenFile?: string | null;
  /**
   * Let `wheelhouse node` listen on an address other than loopback without an admin key.
   * @default false
   */
  insecure?: boolean;
  /**
   * Host names a node that asks for no key answers besides loopback (`localhost`, 127.0.0.0/8,
   * `[::1]`), its own `host` and the host of `advertiseUrl`: names (`wheelhouse.internal`),
   * `*.` names (their subdomains), addresses and CIDRs. Any other `Host` header is refused
   * (403 `host_not_allowed`) while no key is asked for, so a web page that rebinds its own name
   * to 127.0.0.1 cannot use the API. A list in a config file, comma-separated in the
   * environment and on the command line. @default []
   */
  allowedHosts?: string | readonly string[];
  /**
   * Web origins (`https://ops.example.com`) that may open the worker channel's WebSocket
   * besides the node's own: an upgrade whose `Origin` names another is refused (403
   * `origin_not_allowed`). Workers send no `Origin`; browsers always do. @default []
   */
  allowedOrigins?: string | readonly string[];
  /**
   * Shared secret that authenticates messages between nodes (`/internal/*`), at least 32
   * bytes. Every node of a cluster needs the same one; without it a node refuses every
   * node-to-node request, from any address, and so runs alone. @default null
   */
  clusterSecret?: string | null;
  /** A file holding the cluster secret. @default null */
  clusterSecretFile?: string | null;
  /**
   * How long a stopping node may take (in-flight requests, final snapshots, leaving the ring)
   * before the process exits anyway, seconds. A second SIGTERM or SIGINT exits at once.
   * @default 30
   */
  shutdownGraceSeconds?: number;
  /** The URL other nodes reach this one at. null: `http://<host>:<port>` once listening. @default null */
  advertiseUrl?: string | null;
  /** Interval between membership heartbeats, seconds (at most half the failure timeout). @default 1 */
  heartbeatSeconds?: number;
  /** A node whose last heartbeat is older than this is out of the ring, seconds. @default 5 */
  failureTimeoutSeconds?: number;
  /** Run the built-in executors (`wheelhouse.noop`, `wheelhouse.http`) in this node. @default true */
  builtinExecutors?: boolean;
  // The HTTP executor (`wheelhouse.http`): where its tasks may send the node, and how much a call may take.
  /**
   * What the HTTP executor may connect to besides public addresses: CIDRs (`10.0.0.0/8`,
   * `fd00::/8`), addresses (`127.0.0.1`), host names (`hooks.internal`; whatever they resolve
   * to) and `*.` names (`*.svc.cluster.local`: the subdomains). A list in a config file,
   * comma-separated in the environment and on the command line. Anything else that is not a
   * public address — loopback, private, link-local (the cloud metadata address among them),
   * multicast, CGNAT, reserved — is refused, after DNS resolution. `wheelhouse dev`, while it
   * listens on loopback, defaults to `127.0.0.0/8,::1`. @default [] (public addresses only)
   */
  httpExecutorAllow?: string | readonly string[];
  /**
   * The most bytes of an answer's body the HTTP executor reads; past them it closes the
   * connection. @default 65536 (64 KiB)
   */
  httpExecutorMaxResponseBytes?: number;
  /**
   * The longest an HTTP task's call may take in all — waiting for a connection, connecting,
   * the answer and its body — in seconds. A payload's `timeout_ms` may shorten it, and it
   * ends a second before the task's lease. @default 60
   */
  httpExecutorTimeoutSeconds?: number;
  /**
   * Connections the HTTP executor holds open at once to one destination (scheme, host,
   * port); more calls to it wait their turn, within their deadline. @default 8
   */
  httpExecutorConnectionsPerDestination?: number;
  /** `fatal` … `trace`, or `silent`. @default 'info' */
  logLevel?: string;
  /**
   * How log lines are written: `json`, one JSON object a line (for log collectors), or
   * `pretty`, one short human-readable line each (time, level, message, a few fields),
   * coloured when stdout is a terminal. `wheelhouse dev` defaults to `pretty`.
   * @default 'json'
   */
  logFormat?: LogFormat;
}
