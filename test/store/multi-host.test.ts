import { describe, expect, it } from 'vitest';
import { parseHostList } from '../../src/store/multi-host.js';

/** Multi-host connection strings as libpq reads them, for `pg`, which reads one host (decision 0025). */
describe('parseHostList', () => {
  it('splits the servers and keeps what pg reads for each', () => {
    const list = parseHostList(
      'postgres://u:p@127.0.0.1:55433,127.0.0.1:55434/wh?target_session_attrs=read-write&sslmode=disable',
    );
    expect(list.hosts).toEqual([
      { host: '127.0.0.1', port: 55433 },
      { host: '127.0.0.1', port: 55434 },
    ]);
    expect(list.target).toBe('read-write');
    expect(list.singleHostUrl).toBe('postgres://u:p@127.0.0.1:55433/wh?sslmode=disable');
  });

  it('takes the default port, IPv6 addresses and a single host without target', () => {
    expect(parseHostList('postgresql://db1,[::1]:6000/x').hosts).toEqual([
      { host: 'db1', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    const single = parseHostList('postgres://postgres@127.0.0.1:5432/test');
    expect(single.hosts).toHaveLength(1);
    expect(single.target).toBe('any');
    expect(single.singleHostUrl).toBe('postgres://postgres@127.0.0.1:5432/test');
  });

  it('refuses a target_session_attrs it cannot honour, naming the key', () => {
    expect(() => parseHostList('postgres://a,b/x?target_session_attrs=standby')).toThrow(
      /target_session_attrs=standby/,
    );
  });
});
