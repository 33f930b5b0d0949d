import { describe, expect, it } from 'vitest';
import { DestinationPolicy } from '../../src/executors/destination-policy.js';
import { parseDestinationPattern, parseIp, parseRange } from '../../src/lib/address-patterns.js';
import { compileOptions, ConfigError, devHttpExecutorAllow, optionsFromEnv } from '../../src/lib/config.js';

/**
 * The HTTP executor's destination rules, address by address: what a task may make the node
 * connect to by default (public addresses only), what each refusal says, and what
 * `httpExecutorAllow` opens. Addresses that carry an IPv4 address (IPv4-mapped, NAT64, 6to4)
 * are judged by it, so no spelling of 127.0.0.1 gets through.
 */
describe('the destination policy', () => {
  const byDefault = new DestinationPolicy([]);
  /** What an address is refused as, or null; the address given as the URL's host. */
  const verdict = (address: string): string | null => {
    const refusal = byDefault.refusal(address, address);
    return refusal === null
      ? null
      : (/ is (.+); allow it with httpExecutorAllow$/.exec(refusal.message)?.[1] ?? refusal.message);
  };

  it.each([
    ['127.0.0.1', 'a loopback address'],
    ['127.255.0.9', 'a loopback address'],
    ['10.1.2.3', 'a private address'],
    ['172.16.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.1.1', 'a private address'],
    ['169.254.169.254', 'the cloud metadata address (link-local)'],
    ['169.254.10.1', 'a link-local address'],
    ['100.64.0.1', 'a shared (carrier-grade NAT) address'],
    ['100.100.100.200', 'a shared (carrier-grade NAT) address'],
    ['0.0.0.0', 'an unspecified ("this network") address'],
    ['192.0.0.192', 'an IETF protocol address'],
    ['224.0.0.1', 'a multicast address'],
    ['255.255.255.255', 'the broadcast address'],
    ['240.0.0.1', 'a reserved address'],
    ['198.18.0.1', 'a benchmarking address'],
    ['::1', 'a loopback address'],
    ['::', 'an unspecified address'],
    ['fe80::1', 'a link-local address'],
    ['fc00::1', 'a private (unique local) address'],
    ['fd12:3456::1', 'a private (unique local) address'],
    ['fd00:ec2::254', 'the cloud metadata address (unique local)'],
    ['ff02::1', 'a multicast address'],
    ['2001:db8::1', 'a documentation address'],
    ['::127.0.0.1', 'a reserved address'],
    ['::ffff:127.0.0.1', 'a loopback address (IPv4-mapped 127.0.0.1)'],
    ['::ffff:7f00:1', 'a loopback address (IPv4-mapped 127.0.0.1)'],
    ['::ffff:169.254.169.254', 'the cloud metadata address (link-local) (IPv4-mapped 169.254.169.254)'],
    ['64:ff9b::a00:1', 'a private address (NAT64 of 10.0.0.1)'],
    ['2002:c0a8:101::1', 'a private address (6to4 of 192.168.1.1)'],
    ['2002:7f00:1::', 'a loopback address (6to4 of 127.0.0.1)'],
  ])('refuses %s as %s', (address, what) => {
    expect(verdict(address)).toBe(what);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '64:ff9b::808:808', '2002:808:808::'])(
    'allows the public address %s',
    (address) => {
      expect(verdict(address)).toBeNull();
    },
  );

  it('names the address and the rule; for a name, only the log is told what it resolved to', () => {
    const literal = 'refused: 127.0.0.1 is a loopback address; allow it with httpExecutorAllow';
    expect(byDefault.refusal('127.0.0.1', '127.0.0.1')).toEqual({ message: literal, detail: literal });
    expect(byDefault.refusal('localhost', '::1')).toEqual({
      message: 'refused: localhost resolves to a non-public address; allow it with httpExecutorAllow',
      detail: 'refused: localhost resolves to ::1, which is a loopback address; allow it with httpExecutorAllow',
    });
  });

  it('allows what the allow-list names: ranges, addresses, host names and subdomains', () => {
    const policy = new DestinationPolicy(['10.0.0.0/8', '127.0.0.1', 'fd00::/8', 'hooks.internal', '*.svc.local']);
    expect(policy.refusal('10.9.8.7', '10.9.8.7')).toBeNull();
    expect(policy.refusal('::ffff:10.9.8.7', '::ffff:10.9.8.7')).toBeNull();
    expect(policy.refusal('127.0.0.1', '127.0.0.1')).toBeNull();
    expect(policy.refusal('127.0.0.2', '127.0.0.2')?.message).toMatch(/loopback/);
    expect(policy.refusal('fd00::5', 'fd00::5')).toBeNull();
    expect(policy.refusal('192.168.0.1', '192.168.0.1')?.message).toMatch(/private/);
    // A name on the list allows whatever it resolves to; other names are judged by their addresses.
    expect(policy.refusal('HOOKS.internal.', '192.168.0.1')).toBeNull();
    expect(policy.refusal('a.b.svc.local', '172.16.0.1')).toBeNull();
    expect(policy.refusal('svc.local', '172.16.0.1')?.detail).toMatch(/private/);
    expect(policy.refusal('evil.hooks.internal', '172.16.0.1')?.detail).toMatch(/private/);
  });
});

describe('address patterns', () => {
  it('reads addresses in every spelling node:net accepts', () => {
    expect(parseIp('[::1]')).toEqual(parseIp('0:0:0:0:0:0:0:1'));
    expect(parseIp('fe80::1%eth0')).toEqual(parseIp('fe80::1'));
    expect(parseIp('::ffff:1.2.3.4')).toEqual(parseIp('::ffff:102:304'));
    expect(parseIp('localhost')).toBeNull();
    expect(parseIp('1.2.3')).toBeNull();
  });

  it('reads ranges and refuses what is not one', () => {
    expect(parseRange('10.1.2.3/8')).toEqual({ bytes: Uint8Array.from([10, 0, 0, 0]), prefixBits: 8 });
    expect(parseRange('::ffff:10.0.0.0/104')).toEqual({ bytes: Uint8Array.from([10, 0, 0, 0]), prefixBits: 8 });
    for (const bad of ['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/8/8', 'x/8'])
      expect(parseRange(bad), bad).toBeNull();
  });

  it('reads host names and refuses what is not one', () => {
    expect(parseDestinationPattern('Hooks.Internal.')).toEqual({
      kind: 'host',
      name: 'hooks.internal',
      subdomains: false,
    });
    expect(parseDestinationPattern('*.svc.local')).toEqual({ kind: 'host', name: 'svc.local', subdomains: true });
    for (const bad of ['', 'http://x', 'a b', 'a..b', '-a.b', '*', 'x/8', 'a*.b'])
      expect(parseDestinationPattern(bad), bad).toBeNull();
  });
});

describe('the HTTP executor options', () => {
  it('default to public addresses only, 64 KiB, 60 s and 8 connections a destination', () => {
    expect(compileOptions({})).toMatchObject({
      httpExecutorAllow: [],
      httpExecutorMaxResponseBytes: 65_536,
      httpExecutorTimeoutMs: 60_000,
      httpExecutorConnectionsPerDestination: 8,
    });
  });

  it('take the allow-list as a list or as a comma-separated string (the environment, flags)', () => {
    expect(compileOptions({ httpExecutorAllow: ['10.0.0.0/8', 'hooks.internal'] }).httpExecutorAllow).toEqual([
      '10.0.0.0/8',
      'hooks.internal',
    ]);
    const env = optionsFromEnv({ WHEELHOUSE_HTTP_EXECUTOR_ALLOW: '10.0.0.0/8, ::1,hooks.internal' });
    expect(compileOptions(env).httpExecutorAllow).toEqual(['10.0.0.0/8', '::1', 'hooks.internal']);
    expect(compileOptions({ httpExecutorAllow: '' }).httpExecutorAllow).toEqual([]);
  });

  it('refuse an entry that is not a CIDR, an address or a host name, naming the key', () => {
    expect(() => compileOptions({ httpExecutorAllow: ['10.0.0.0/33'] })).toThrow(ConfigError);
    expect(() => compileOptions({ httpExecutorAllow: 'http://x' })).toThrow(
      'config httpExecutorAllow: "http://x" is not a CIDR, an IP address or a host name',
    );
    expect(() => compileOptions({ httpExecutorTimeoutSeconds: 0 })).toThrow(/httpExecutorTimeoutSeconds/);
    expect(() => compileOptions({ httpExecutorMaxResponseBytes: 10 })).toThrow(/httpExecutorMaxResponseBytes/);
    expect(() => compileOptions({ httpExecutorConnectionsPerDestination: 0 })).toThrow(
      /httpExecutorConnectionsPerDestination/,
    );
  });

  it('let `wheelhouse dev` call loopback while it listens on loopback, and not otherwise', () => {
    expect(devHttpExecutorAllow(undefined)).toEqual(['127.0.0.0/8', '::1']);
    expect(devHttpExecutorAllow('localhost')).toEqual(['127.0.0.0/8', '::1']);
    expect(devHttpExecutorAllow('::1')).toEqual(['127.0.0.0/8', '::1']);
    expect(devHttpExecutorAllow('0.0.0.0')).toEqual([]);
    expect(devHttpExecutorAllow('192.168.1.20')).toEqual([]);
  });
});
