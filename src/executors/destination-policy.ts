import {
  hostMatches,
  parseDestinationPattern,
  parseIp,
  parseRange,
  rangeContains,
  unmapIpv4,
  type DestinationPattern,
  type IpBytes,
  type IpRange,
} from '../lib/address-patterns.js';

/**
 * Which addresses the HTTP executor may connect to. By default, public ones only: a task's
 * URL must not turn the node against its own network (loopback services, private ranges, the
 * cloud metadata address). An operator opens what they choose with `httpExecutorAllow`.
 *
 * The verdict is on the address a connection is about to be made to, after DNS resolution
 * (see guarded-dispatcher.ts), so a name that resolves to 127.0.0.1 is refused like the
 * address itself. Addresses that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) are
 * judged by the IPv4 address they carry.
 */
export class DestinationPolicy {
  private readonly ranges: IpRange[] = [];
  private readonly hosts: { name: string; subdomains: boolean }[] = [];

  /** `allow`: entries as `parseDestinationPattern` reads them (compileOptions has checked them). */
  constructor(allow: readonly string[]) {
    for (const entry of allow) {
      const pattern: DestinationPattern | null = parseDestinationPattern(entry);
      if (pattern === null) throw new Error(`httpExecutorAllow: "${entry}" is not a CIDR, an address or a host name`);
      if (pattern.kind === 'range') this.ranges.push(pattern.range);
      else this.hosts.push(pattern);
    }
  }

  /**
   * Why a connection to `address`, reached through the URL's `host` (a name, or the address
   * itself), is refused, or null if it may be made. A host name on the allow-list allows
   * whatever it resolves to.
   */
  refusal(host: string, address: string): Refusal | null {
    if (this.hosts.some((pattern) => hostMatches(pattern, host))) return null;
    const ip = parseIp(address);
    const named = parseIp(host) === null;
    if (ip === null) {
      const detail = `refused: ${host} resolves to ${address}, which is not an IP address`;
      return { message: named ? `refused: ${host} resolves to a non-public address` : detail, detail };
    }
    const carried = carriedIpv4(ip);
    if (this.ranges.some((range) => rangeContainsEither(range, ip, carried))) return null;
    const what = classify(ip, carried);
    if (what === null) return null;
    const hint = '; allow it with httpExecutorAllow';
    if (!named) {
      // The URL named the address: saying what it is tells the submitter nothing new.
      const message = `refused: ${address} is ${what}${hint}`;
      return { message, detail: message };
    }
    return {
      message: `refused: ${host} resolves to a non-public address${hint}`,
      detail: `refused: ${host} resolves to ${address}, which is ${what}${hint}`,
    };
  }
}

/**
 * A refused connection: what the task fails with (`message`, seen by whoever can read the task:
 * it does not say what an internal name resolves to, or a submitter could map the node's
 * network through its DNS), and what the node logs (`detail`: the address and the rule).
 */
export interface Refusal {
  message: string;
  detail: string;
}

/** Special-purpose ranges (IANA's registries), each with what it is. The first match names an address. */
const SPECIAL: readonly (readonly [string, string])[] = [
  ['169.254.169.254/32', 'the cloud metadata address (link-local)'],
  ['fd00:ec2::254/128', 'the cloud metadata address (unique local)'],
  ['0.0.0.0/8', 'an unspecified ("this network") address'],
  ['10.0.0.0/8', 'a private address'],
  ['100.64.0.0/10', 'a shared (carrier-grade NAT) address'],
  ['127.0.0.0/8', 'a loopback address'],
  ['169.254.0.0/16', 'a link-local address'],
  ['172.16.0.0/12', 'a private address'],
  ['192.0.0.0/24', 'an IETF protocol address'],
  ['192.0.2.0/24', 'a documentation address'],
  ['192.88.99.0/24', 'a reserved address'],
  ['192.168.0.0/16', 'a private address'],
  ['198.18.0.0/15', 'a benchmarking address'],
  ['198.51.100.0/24', 'a documentation address'],
  ['203.0.113.0/24', 'a documentation address'],
  ['224.0.0.0/4', 'a multicast address'],
  ['255.255.255.255/32', 'the broadcast address'],
  ['240.0.0.0/4', 'a reserved address'],
  ['::/128', 'an unspecified address'],
  ['::1/128', 'a loopback address'],
  ['64:ff9b:1::/48', 'a private (local-use NAT64) address'],
  ['2001::/23', 'a reserved (IETF protocol) address'],
  ['2001:db8::/32', 'a documentation address'],
  ['3fff::/20', 'a documentation address'],
  ['fc00::/7', 'a private (unique local) address'],
  ['fe80::/10', 'a link-local address'],
  ['fec0::/10', 'a reserved (site-local) address'],
  ['ff00::/8', 'a multicast address'],
];
const SPECIAL_RANGES = SPECIAL.map(([cidr, what]) => ({ range: parseRange(cidr) as IpRange, what }));
/** 2000::/3: global unicast, the only IPv6 addresses handed out for the internet so far. */
const GLOBAL_UNICAST = parseRange('2000::/3') as IpRange;
const NAT64 = parseRange('64:ff9b::/96') as IpRange;
const SIX_TO_FOUR = parseRange('2002::/16') as IpRange;

/** What a refused address is ("a loopback address"), or null for a public one. */
function classify(ip: IpBytes, carried: CarriedIpv4 | null): string | null {
  if (carried !== null) {
    const what = classify(carried.ip, null);
    return what === null ? null : `${what} (${carried.how} ${carried.ip.join('.')})`;
  }
  for (const { range, what } of SPECIAL_RANGES) if (rangeContains(range, ip)) return what;
  if (ip.length === 16 && !rangeContains(GLOBAL_UNICAST, ip)) return 'a reserved address';
  return null;
}

interface CarriedIpv4 {
  ip: IpBytes;
  how: 'IPv4-mapped' | 'NAT64 of' | '6to4 of';
}

/** The IPv4 address an IPv6 address carries: IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 (2002::/16). */
function carriedIpv4(ip: IpBytes): CarriedIpv4 | null {
  if (ip.length !== 16) return null;
  const v4 = unmapIpv4(ip);
  if (v4.length === 4) return { ip: v4, how: 'IPv4-mapped' };
  if (rangeContains(NAT64, ip)) return { ip: ip.slice(12), how: 'NAT64 of' };
  if (rangeContains(SIX_TO_FOUR, ip)) return { ip: ip.slice(2, 6), how: '6to4 of' };
  return null;
}

function rangeContainsEither(range: IpRange, ip: IpBytes, carried: CarriedIpv4 | null): boolean {
  return rangeContains(range, ip) || (carried !== null && rangeContains(range, carried.ip));
}

/**
 * A connection the destination policy refused: its message is what the task fails with, its
 * `detail` (the address and the rule) is for the node's log.
 */
export class DestinationRefusedError extends Error {
  readonly code = 'WH_DESTINATION_REFUSED';
  readonly detail: string;
  constructor(refusal: Refusal) {
    super(refusal.message);
    this.name = 'DestinationRefusedError';
    this.detail = refusal.detail;
  }
}
