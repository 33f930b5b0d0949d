import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, compileOptions, optionsFromEnv } from '../../src/lib/config.js';
import { CLI, requireBuiltCli } from '../support/processes.js';

/** `redisCluster` and the seed list it makes of `redisUrl`, in every layer. */
describe('the redisCluster option', () => {
  it('is off by default, and takes one URL or seed nodes separated by commas', () => {
    expect(compileOptions({}).redisCluster).toBe(false);
    const on = compileOptions({ redisCluster: true, redisUrl: 'redis://10.0.0.1:7000, rediss://u:p@10.0.0.2:7000' });
    expect(on.redisCluster).toBe(true);
    expect(on.redisUrl).toBe('redis://10.0.0.1:7000, rediss://u:p@10.0.0.2:7000');
    expect(compileOptions({ redisCluster: true }).redisUrl).toBe('redis://127.0.0.1:6379');
  });

  it('names redisUrl when a seed is not a Redis URL, and redisCluster when it is not a boolean', () => {
    expect(() => compileOptions({ redisCluster: true, redisUrl: 'redis://a:1,http://b:2' })).toThrow(ConfigError);
    expect(() => compileOptions({ redisCluster: true, redisUrl: 'redis://a:1,http://b:2' })).toThrow(/redisUrl/);
    expect(() => compileOptions({ redisCluster: 'yes' as unknown as boolean })).toThrow(/redisCluster/);
  });

  it('reads WHEELHOUSE_REDIS_CLUSTER', () => {
    expect(optionsFromEnv({ WHEELHOUSE_REDIS_CLUSTER: 'true' })).toEqual({ redisCluster: true });
    expect(optionsFromEnv({ WHEELHOUSE_REDIS_CLUSTER: '0' })).toEqual({ redisCluster: false });
  });

  it('is a switch on the command line: --redis-cluster alone means true', () => {
    requireBuiltCli();
    const run = (...flags: string[]) =>
      spawnSync(process.execPath, [CLI, 'node', '--redis-url', 'redis://a:1,ftp://b', ...flags], { encoding: 'utf8' });
    // With the switch the URL is a seed list, and its second seed is refused before anything starts.
    const on = run('--redis-cluster', '--port', '0');
    expect(on.status).toBe(2);
    expect(on.stderr).toMatch(/redisUrl.*ftp:\/\/b/);
    const off = run('--redis-cluster', 'false', '--port', '0', '--postgres-url', 'postgres://127.0.0.1:1/none');
    expect(off.stderr).not.toMatch(/redisUrl/);
  });
});
