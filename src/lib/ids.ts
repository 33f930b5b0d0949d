import { createHash, randomBytes } from 'node:crypto';

/**
 * A UUID v7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, so ids sort by
 * creation time and `ORDER BY id DESC` lists newest first.
 */
export function uuidv7(nowMs: number = Date.now()): string {
  if (poolOffset + RANDOM_BYTES > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  writeMs(nowMs);
  // 74 random bits, as the layout has room for: 18 hex digits (the last 9 bytes, two digits a
  // byte, around the dashes), and 2 bits of the variant digit (the first byte's).
  const r = poolOffset;
  ID[19] = VARIANT_DIGITS[(pool[r] as number) & 3] as number;
  hexAt(15, pool[r + 1] as number);
  ID[17] = HEX_DIGITS[(pool[r + 2] as number) & 15] as number;
  hexAt(20, pool[r + 3] as number);
  ID[22] = HEX_DIGITS[(pool[r + 4] as number) & 15] as number;
  for (let i = 0; i < 5; i++) hexAt(24 + 2 * i, pool[r + 5 + i] as number);
  ID[34] = HEX_DIGITS[(pool[r + 2] as number) >> 4] as number;
  ID[35] = HEX_DIGITS[(pool[r + 4] as number) >> 4] as number;
  poolOffset += RANDOM_BYTES;
  // One string an id: the layout is written into a scratch buffer and read out once.
  return ID.toString('latin1', 0, 36);
}

/** ASCII of the hex digits, and of the variant digits (the variant's bits 10, then two random ones). */
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const VARIANT_DIGITS = Buffer.from('89ab', 'latin1');

/** The id being written: `tttttttt-tttt-7rrr-vrrr-rrrrrrrrrrrr`, its dashes and version digit fixed. */
const ID = Buffer.from('00000000-0000-7000-8000-000000000000', 'latin1');

/** Writes byte `b` as two hex digits at `at` of {@link ID}. */
function hexAt(at: number, b: number): void {
  ID[at] = HEX_DIGITS[b >> 4] as number;
  ID[at + 1] = HEX_DIGITS[b & 15] as number;
}

/** The millisecond last written into {@link ID}: the ids of a batch share one. */
let lastMs = -1;

/** Writes `ms` (its low 48 bits, whole milliseconds, never negative) as the first 12 hex digits of {@link ID}. */
function writeMs(ms: number): void {
  const whole = Math.max(0, Math.floor(ms)) % 2 ** 48;
  if (whole === lastMs) return;
  lastMs = whole;
  const hex = whole.toString(16).padStart(12, '0');
  ID.write(hex.slice(0, 8), 0, 'latin1');
  ID.write(hex.slice(8), 9, 'latin1');
}

/**
 * The lowest UUID v7 of the millisecond `ms`: every id made at an earlier millisecond sorts
 * below it, every id made at `ms` or later at or above it (a bound of a walk by id).
 */
export function uuidv7Floor(ms: number): string {
  return formatV7(Buffer.alloc(16), ms);
}

/** Writes the v7 layout over 16 bytes: `ms` in the first 48 bits, then version and variant. */
function formatV7(bytes: Buffer, ms: number): string {
  let rest = Math.max(0, Math.floor(ms));
  for (let i = 5; i >= 0; i--) {
    bytes[i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  return formatUuid(bytes);
}

/**
 * Random bytes for ids, cut from a pooled buffer: one `randomBytes(16)` call costs ~9 µs
 * (a syscall each), which at 50 000 ids a second was the node's largest single cost. An id
 * takes 10 bytes of it, written out as hex in one call, with no buffer of its own.
 */
const RANDOM_BYTES = 10;
const POOL_BYTES = RANDOM_BYTES * 4096;
let pool = Buffer.alloc(0);
let poolOffset = POOL_BYTES;

/** A deterministic UUID (v8 layout) derived from a name, e.g. a task id and attempt. */
export function nameUuid(name: string): string {
  const bytes = createHash('sha256').update(name).digest().subarray(0, 16);
  bytes[6] = 0x80 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  return formatUuid(bytes);
}

function formatUuid(bytes: Uint8Array): string {
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}

/**
 * The wheel partition a task belongs to: FNV-1a of its id, modulo the partition count.
 * Stable across processes and versions; it is stored with the task.
 */
export function partitionOf(taskId: string, partitions: number): number {
  return fnv1a(taskId) % partitions;
}

/** FNV-1a (32 bits, unsigned) of a string's UTF-16 code units: cheap, stable, well spread. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The id of a cron schedule's instance for one fire time: a UUID v7 whose timestamp is the
 * fire time and whose other bits come from a hash of (schedule, generation, fire time). Deterministic,
 * so a second activation of the schedule's actor derives the same id and cannot insert the
 * instance twice; time-ordered, so a schedule's instances list newest first like any task.
 */
export function instanceId(scheduleId: string, generation: number, fireMs: number): string {
  const name = `${scheduleId.toLowerCase()}#${generation}@${fireMs}`;
  return formatV7(createHash('sha256').update(name).digest().subarray(0, 16), fireMs);
}

/**
 * A cron instance's jitter: 0 … `maxMs` milliseconds, spread uniformly over schedules and
 * fire times but fixed for each (schedule, fire time), so a re-created instance keeps its
 * due time.
 */
export function jitterOf(scheduleId: string, fireMs: number, maxMs: number): number {
  if (maxMs <= 0) return 0;
  const digest = createHash('sha256').update(`jitter:${scheduleId.toLowerCase()}@${fireMs}`).digest();
  // 48 bits of the digest as a fraction of 2^48: uniform enough for any jitter in ms.
  const fraction = digest.readUIntBE(0, 6) / 2 ** 48;
  return Math.floor(fraction * (Math.floor(maxMs) + 1));
}

/**
 * The creation time of a UUID v7 (its first 48 bits, Unix ms); null for any other id (a
 * malformed one, or another version, whose first bits are no time).
 */
export function uuidv7Ms(id: string): number | null {
  if (!isUuid(id) || id[14] !== '7') return null;
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}
