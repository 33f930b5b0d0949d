/**
 * UNIT tests of the node's log formats: `json` is pino's JSON lines; `pretty` is one short line
 * a record — time, level, message, the fields that matter — without pid or hostname, a request
 * folded into its message, and no colour codes when not written to a terminal.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, compileOptions, optionsFromEnv } from '../../src/lib/config.js';
import { nodeLogger } from '../../src/node/logger.js';

function written(): { to: { write(line: string): void }; text: string[] } {
  const text: string[] = [];
  return { to: { write: (line: string) => void text.push(line) }, text };
}

describe('nodeLogger', () => {
  it('writes JSON lines in json', () => {
    const { to, text } = written();
    nodeLogger({ logLevel: 'info', logFormat: 'json' }, to).info({ count: 3 }, 'started');
    expect(JSON.parse(text[0]!)).toEqual(expect.objectContaining({ level: 30, msg: 'started', count: 3 }));
  });

  it('never writes a key, the cluster secret or a lease token, in either format', () => {
    for (const logFormat of ['json', 'pretty'] as const) {
      const { to, text } = written();
      const log = nodeLogger({ logLevel: 'info', logFormat }, to);
      log.info(
        { req: { headers: { authorization: 'Bearer whk_secret1', 'x-wheelhouse-cluster-secret': 'secret2' } } },
        'in',
      );
      log.info({ body: { lease_token: 'lt2.secret3' }, lease_token: 'lt2.secret4' }, 'body');
      const all = text.join('');
      for (const secret of ['secret1', 'secret2', 'secret3', 'secret4']) expect(all, logFormat).not.toContain(secret);
    }
  });

  it('writes one readable line a record in pretty', () => {
    const { to, text } = written();
    const log = nodeLogger({ logLevel: 'info', logFormat: 'pretty' }, to);
    log.info({ nodeId: 'n-1' }, 'wheelhouse node started');
    log
      .child({ reqId: 'req-7' })
      .info({ req: { method: 'POST', url: '/api/tasks', remotePort: 5 } }, 'incoming request');
    log.child({ reqId: 'req-7' }).info({ res: { statusCode: 201 }, responseTime: 3.4 }, 'request completed');
    log.debug('not at info');
    expect(text).toEqual([
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: wheelhouse node started \{"nodeId":"n-1"\}\n$/),
      expect.stringMatching(/^\[[\d:.]+\] INFO: \[req-7\] incoming request POST \/api\/tasks\n$/),
      expect.stringMatching(/^\[[\d:.]+\] INFO: \[req-7\] request completed 201 in 3 ms\n$/),
    ]);
    expect(text.join('')).not.toMatch(/pid|hostname|\u001b\[/);
  });

  it('keeps an error with its stack in pretty', () => {
    const { to, text } = written();
    nodeLogger({ logLevel: 'info', logFormat: 'pretty' }, to).error({ err: new Error('boom') }, 'it failed');
    expect(text[0]).toMatch(/ERROR: it failed/);
    expect(text[0]).toMatch(/Error: boom\n\s+at /);
  });
});

describe('the logFormat option', () => {
  it('is json unless chosen, from the environment or a flag, and only pretty or json', () => {
    expect(compileOptions({}).logFormat).toBe('json');
    expect(compileOptions(optionsFromEnv({ WHEELHOUSE_LOG_FORMAT: 'pretty' })).logFormat).toBe('pretty');
    expect(() => compileOptions(optionsFromEnv({ WHEELHOUSE_LOG_FORMAT: 'xml' }))).toThrow(ConfigError);
    expect(() => compileOptions(optionsFromEnv({ WHEELHOUSE_LOG_FORMAT: 'xml' }))).toThrow(/logFormat/);
  });
});
