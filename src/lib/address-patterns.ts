import { isIPv4, isIPv6 } from 'node:net';

/**
 * IP addresses, CIDR ranges and host-name patterns, as an operator writes them in an
 * allow-list (`10.0.0.0/8`, `fd00::/8`, `127.0.0.1`, `hooks.internal`, `*.svc.cluster.local`).
 * Pure: no lookups.
 */

/** An IP address as its bytes: 4 of them for IPv4, 16 for IPv6. */
export type IpBytes = Uint8Array;

/** A CIDR range: the bytes of its first address and the length of its prefix, in bits. */
export interface IpRange {
  readonly bytes: IpBytes;
  readonly prefixBits: number;
}

/** What an allow-list entry names: a range of addresses, or a host name (and with `*.`, its subdomains). */
export type DestinationPattern =
  | { readonly kind: 'range'; readonly range: IpRange }
  | { readonly kind: 'host'; readonly name: string; readonly subdomains: boolean };

/** The bytes of an IP address (`127.0.0.1`, `::1`, `[::1]`, `fe80::1%eth0`), or null if it is none. */
export function parseIp(text: string): IpBytes | null {
  let t = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const zone = t.indexOf('%');
  if (zone !== -1) t = t.slice(0, zone);
  if (isIPv4(t)) return Uint8Array.from(t.split('.').map(Number));
  if (isIPv6(t)) return parseIpv6(t);
  return null;
}

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) carries, or the address itself. */
export function unmapIpv4(ip: IpBytes): IpBytes {
  return ip.length === 16 && startsWith(ip, IPV4_MAPPED, 96) ? ip.slice(12) : ip;
}

/** Whether `ip` is in `range` (IPv4-mapped addresses count as the IPv4 address they carry). */
export function rangeContains(range: IpRange, ip: IpBytes): boolean {
  const address = unmapIpv4(ip);
  return address.length === range.bytes.length && startsWith(address, range.bytes, range.prefixBits);
}

/** A range written `address/bits` or a bare address (all its bits), or null if `text` is neither. */
export function parseRange(text: string): IpRange | null {
  const slash = text.indexOf('/');
  const ip = parseIp(slash === -1 ? text : text.slice(0, slash));
  if (ip === null) return null;
  const prefixText = slash === -1 ? null : text.slice(slash + 1);
  if (prefixText !== null && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefixBits = prefixText === null ? ip.length * 8 : Number(prefixText);
  if (prefixBits > ip.length * 8) return null;
  // `::ffff:10.0.0.0/104` is `10.0.0.0/8`: addresses are compared unmapped.
  if (ip.length === 16 && prefixBits >= 96 && startsWith(ip, IPV4_MAPPED, 96)) {
    return { bytes: mask(ip.slice(12), prefixBits - 96), prefixBits: prefixBits - 96 };
  }
  return { bytes: mask(ip, prefixBits), prefixBits };
}

/**
 * An allow-list entry: a range or address, a host name, or `*.` and a name (its subdomains,
 * not the name itself). Names are compared in lower case without a trailing dot. null: not
 * an entry.
 */
export function parseDestinationPattern(text: string): DestinationPattern | null {
  const range = parseRange(text);
  if (range !== null) return { kind: 'range', range };
  const lower = text.toLowerCase().replace(/\.$/, '');
  const subdomains = lower.startsWith('*.');
  const name = subdomains ? lower.slice(2) : lower;
  if (name.length > 253 || !HOST_NAME.test(name)) return null;
  return { kind: 'host', name, subdomains };
}

/** Whether a host name (as in a URL) matches a host pattern. */
export function hostMatches(pattern: { name: string; subdomains: boolean }, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return pattern.subdomains ? h.endsWith(`.${pattern.name}`) : h === pattern.name;
}

/** Whether `host` (a name or an address) is this machine's loopback: `localhost`, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase().replace(/\.$/, '') === 'localhost') return true;
  const ip = parseIp(host);
  if (ip === null) return false;
  const v4 = unmapIpv4(ip);
  return v4.length === 4 ? v4[0] === 127 : v4.every((b, i) => b === (i === 15 ? 1 : 0));
}

/** Labels of letters, digits, `-` and `_` (seen in service records), separated by dots. */
const HOST_NAME = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** `::ffff:0:0/96`, the prefix of IPv4-mapped IPv6 addresses. */
const IPV4_MAPPED = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0]);

/** Whether the first `bits` bits of `a` and `b` are equal. */
function startsWith(a: IpBytes, b: IpBytes, bits: number): boolean {
  for (let i = 0; i * 8 < bits; i++) {
    const keep = Math.min(8, bits - i * 8);
    const m = (0xff << (8 - keep)) & 0xff;
    if (((a[i] ?? 0) & m) !== ((b[i] ?? 0) & m)) return false;
  }
  return true;
}

/** `ip` with every bit past the first `bits` cleared. */
function mask(ip: IpBytes, bits: number): IpBytes {
  return ip.map((byte, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    return byte & ((0xff << (8 - keep)) & 0xff);
  });
}

/** The 16 bytes of a valid IPv6 address (node:net checked it): `::` expanded, a dotted IPv4 tail read. */
function parseIpv6(text: string): IpBytes {
  const words = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const gap = text.indexOf('::');
  const head = words(gap === -1 ? text : text.slice(0, gap));
  const tail = gap === -1 ? [] : words(text.slice(gap + 2));
  const all = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  all.forEach((word, i) => {
    bytes[i * 2] = word >> 8;
    bytes[i * 2 + 1] = word & 0xff;
  });
  return bytes;
}
