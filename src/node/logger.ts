import { pino, type DestinationStream, type Logger } from 'pino';
import { isColorSupported, prettyFactory } from 'pino-pretty';
import type { CompiledOptions } from '../lib/config.js';

/**
 * The node's logger. `json` is pino's own output, one JSON object a line, for log collectors.
 * `pretty` is for a person at a terminal (`wheelhouse dev`): one short line each — time,
 * level, message and the fields that matter — coloured when the output is a terminal, with no
 * pid or hostname, and a request shown as `GET /api/tasks` or `201 in 3 ms`.
 *
 * The pretty lines are formatted in-process and written synchronously (`prettyFactory` and a
 * sync destination), not through pino's worker-thread transport: a dev node's volume is small,
 * and a line written before `log.info` returns cannot be lost when the process exits right
 * after `close()` — a transport's worker would have to be flushed and ended first.
 */
export function nodeLogger(options: Pick<CompiledOptions, 'logLevel' | 'logFormat'>, to?: DestinationStream): Logger {
  const settings = { level: options.logLevel, redact: SECRETS };
  if (options.logFormat === 'json') return to === undefined ? pino(settings) : pino(settings, to);
  const out = to ?? pino.destination({ dest: 1, sync: true });
  const colorize = to === undefined && process.stdout.isTTY && isColorSupported;
  return pino(settings, prettyStream(out, colorize));
}

/**
 * Never written to a log, whatever logs a request or a body (docs/security.md): API keys, the
 * cluster secret, lease tokens.
 */
const SECRETS = [
  'req.headers.authorization',
  'req.headers["x-wheelhouse-cluster-secret"]',
  'headers.authorization',
  'headers["x-wheelhouse-cluster-secret"]',
  'lease_token',
  '*.lease_token',
];

/** Request fields fastify logs: shown in the message, not as an object. */
interface RequestFields {
  reqId?: unknown;
  req?: { method?: unknown; url?: unknown };
  res?: { statusCode?: unknown };
  responseTime?: unknown;
}

/** A destination that formats each JSON line pino writes and hands the text to `out`. */
export function prettyStream(out: DestinationStream, colorize = false): DestinationStream {
  const format = prettyFactory({
    colorize,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,reqId,req,res,responseTime',
    singleLine: true,
    messageFormat: (log, messageKey) => {
      const { reqId, req, res, responseTime } = log as RequestFields;
      const parts: string[] = [];
      if (typeof reqId === 'string' || typeof reqId === 'number') parts.push(`[${reqId}]`);
      const message = log[messageKey];
      parts.push(typeof message === 'string' ? message : JSON.stringify(message ?? ''));
      if (req !== undefined) parts.push(`${String(req.method)} ${String(req.url)}`);
      if (res !== undefined) {
        const ms = typeof responseTime === 'number' ? ` in ${Math.round(responseTime)} ms` : '';
        parts.push(`${String(res.statusCode)}${ms}`);
      }
      return parts.join(' ');
    },
  });
  return { write: (line: string) => void out.write(format(line)) };
}
