import { parseArgs } from 'node:util';

import { Transport } from '../client/http.js';
import { limitFromWire, limitToWire, typePauseFromWire } from '../client/limits.js';
import type { Limit, LimitDeclaration, OnLimit } from '../client/types.js';
import { itemsOf, nextTokenFromWire } from '../client/wire.js';
import type { ProgressSink } from './progress.js';
import { CONNECTION_OPTIONS, intFlag, nodeConnection, UsageError } from './usage.js';
import { table } from './table.js';

/**
 * `wheelhouse limits <set|get|list|delete|pause-type|resume-type>`: flow control from the
 * command line (API.md "Flow control"). Like the other client verbs, `--json` prints what the
 * node answered; otherwise a few lines or a table for people. (`wheelhouse pause <task_id>`
 * already pauses a cron schedule, so a task type is paused with `limits pause-type`.)
 */

export const LIMITS_HELP = `Flow control (limits; set, delete, pause-type and resume-type need an admin key):
  wheelhouse limits set <name> [--concurrency <n|none>] [--rate <n>/<seconds>s | none]
                    [--burst <n>] [--on-limit queue|cancel_running|cancel_new|keep_latest_waiting]
                    [--weight <w>]       declares the whole limit: what is left out is the
                                         default (unlimited, queue, weight 1); a name ending
                                         in :* is a family (customer:*); --rate 100/60s
  wheelhouse limits get <name>           values (or its family's) and running, waiting
  wheelhouse limits list [--prefix <p>] [--limit <n>]
  wheelhouse limits delete <name>        refused (limit_in_use) while tasks wait on it
  wheelhouse limits pause-type <task_type>   its key type:<task_type> at concurrency 0
  wheelhouse limits resume-type <task_type>
`;

const ON_LIMIT: readonly OnLimit[] = ['queue', 'cancel_running', 'cancel_new', 'keep_latest_waiting'];

/**
 * Runs `limits <sub> …`; writes its output to `out` and resolves with the exit code. Throws
 * `UsageError` (with this help) for bad arguments, client errors as they are.
 */
export async function runLimitsVerb(
  argv: string[],
  out: (text: string) => void,
  env: NodeJS.ProcessEnv,
  stderr: ProgressSink,
): Promise<number> {
  try {
    return await runLimits(argv, out, env, stderr);
  } catch (error) {
    if (error instanceof UsageError && error.usage === undefined) {
      throw new UsageError(error.message, { usage: LIMITS_HELP, cause: error });
    }
    throw error;
  }
}

async function runLimits(
  argv: string[],
  out: (text: string) => void,
  env: NodeJS.ProcessEnv,
  stderr: ProgressSink,
): Promise<number> {
  const { values, positionals } = parse(argv);
  const [sub, target, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`, { usage: LIMITS_HELP });
  const http = new Transport(nodeConnection(values, env, (text) => stderr.write(text)));
  const print = (body: unknown, human: () => string): void =>
    out(values.json === true ? `${JSON.stringify(body, null, 2)}\n` : human());
  const named = (what: string): string => {
    if (target === undefined) throw new UsageError(`wheelhouse limits ${sub} needs ${what}`, { usage: LIMITS_HELP });
    return target;
  };
  const limitPath = (): string => `/api/limits/${encodeURIComponent(named('a limit name'))}`;
  switch (sub) {
    case 'set': {
      const { body } = await http.send({
        method: 'PUT',
        path: limitPath(),
        body: limitToWire(declaration(values)),
        idempotent: true,
      });
      print(body, () => limitLines(limitFromWire(body)));
      return 0;
    }
    case 'get': {
      const { body } = await http.send({ method: 'GET', path: limitPath(), idempotent: true });
      print(body, () => limitLines(limitFromWire(body)));
      return 0;
    }
    case 'list': {
      if (target !== undefined)
        throw new UsageError('wheelhouse limits list takes no name (--prefix)', { usage: LIMITS_HELP });
      const limit = values.limit === undefined ? 1000 : intFlag(values.limit, '--limit', 1);
      const limits: unknown[] = [];
      let nextToken: string | null = null;
      do {
        const query = { prefix: values.prefix, limit: Math.min(1000, limit - limits.length), next_token: nextToken };
        const { body } = await http.send({ method: 'GET', path: '/api/limits', query, idempotent: true });
        limits.push(...itemsOf((body as { limits?: unknown }).limits));
        nextToken = nextTokenFromWire(body);
      } while (nextToken !== null && limits.length < limit);
      print({ limits, next_token: nextToken }, () =>
        table(
          ['NAME', 'CONCURRENCY', 'RATE', 'ON LIMIT', 'WEIGHT'],
          limits.map(limitFromWire).map((l) => [l.name, concurrencyText(l), rateText(l), l.onLimit, String(l.weight)]),
        ),
      );
      return 0;
    }
    case 'delete': {
      const path = limitPath();
      const { body } = await http.send({ method: 'DELETE', path, idempotent: false });
      print(body, () => `deleted ${target}\n`);
      return 0;
    }
    case 'pause-type':
    case 'resume-type': {
      const taskType = named('a task type');
      const verb = sub === 'pause-type' ? 'pause' : 'resume';
      const path = `/api/task-types/${encodeURIComponent(taskType)}/${verb}`;
      const { body } = await http.send({ method: 'POST', path, idempotent: true });
      const answer = typePauseFromWire(body);
      print(body, () => `${answer.taskType}  ${answer.paused ? 'paused' : 'not paused'}\n`);
      return 0;
    }
    default:
      throw new UsageError(
        sub === undefined ? 'wheelhouse limits needs a subcommand' : `unknown subcommand "limits ${sub}"`,
        { usage: LIMITS_HELP },
      );
  }
}

type Values = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        ...CONNECTION_OPTIONS,
        concurrency: { type: 'string' },
        rate: { type: 'string' },
        burst: { type: 'string' },
        'on-limit': { type: 'string' },
        weight: { type: 'string' },
        prefix: { type: 'string' },
        limit: { type: 'string' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message, { usage: LIMITS_HELP });
  }
}

/** `limits set`'s flags → a declaration; the node checks the bounds and names the field. */
function declaration(values: Values): LimitDeclaration {
  const out: LimitDeclaration = {};
  if (values.concurrency !== undefined) {
    out.concurrency = values.concurrency === 'none' ? null : intFlag(values.concurrency, '--concurrency', 0);
  }
  if (values.rate !== undefined && values.rate !== 'none') {
    const match = /^(\d+)\/(\d*\.?\d*)s$/.exec(values.rate);
    const periodSeconds = match?.[2] === '' ? 1 : Number(match?.[2]);
    if (match === null || !Number.isFinite(periodSeconds) || periodSeconds <= 0) {
      throw new UsageError(`--rate must be <starts>/<seconds>s (100/60s, 5/s) or none, got "${values.rate}"`);
    }
    out.rate = {
      limit: Number(match[1]),
      periodSeconds,
      ...(values.burst === undefined ? {} : { burst: intFlag(values.burst, '--burst', 0) }),
    };
  } else if (values.burst !== undefined) {
    throw new UsageError('--burst goes with --rate');
  } else if (values.rate === 'none') {
    out.rate = null;
  }
  if (values['on-limit'] !== undefined) {
    const onLimit = values['on-limit'] as OnLimit;
    if (!ON_LIMIT.includes(onLimit)) throw new UsageError(`--on-limit must be one of ${ON_LIMIT.join(', ')}`);
    out.onLimit = onLimit;
  }
  if (values.weight !== undefined) {
    const weight = Number(values.weight);
    if (!Number.isFinite(weight) || weight <= 0)
      throw new UsageError(`--weight must be a number > 0, got "${values.weight}"`);
    out.weight = weight;
  }
  return out;
}

function concurrencyText(l: Limit): string {
  return l.concurrency === null ? 'unlimited' : l.concurrency === 0 ? '0 (paused)' : String(l.concurrency);
}

function rateText(l: Limit): string {
  if (l.rate === null) return 'unlimited';
  return `${l.rate.limit}/${l.rate.periodSeconds}s${l.rate.burst > 0 ? ` +${l.rate.burst}` : ''}`;
}

function limitLines(l: Limit): string {
  const lines: [string, string][] = [
    ['limit', l.name],
    ['declared as', l.declaredAs],
    ['concurrency', concurrencyText(l)],
    ['rate', rateText(l)],
    ['on limit', l.onLimit],
    ['weight', String(l.weight)],
  ];
  if (l.running !== null) lines.push(['running', String(l.running)]);
  if (l.waiting !== null) lines.push(['waiting', String(l.waiting)]);
  return lines.map(([k, v]) => `${k.padEnd(13)}${v}\n`).join('');
}
