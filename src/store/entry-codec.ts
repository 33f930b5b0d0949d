/**
 * How due entries are written into the fast index, shared by the Redis and in-process
 * stores so that both order and deduplicate alike.
 *
 * Task ids are UUIDs and task types are `[A-Za-z0-9_.:-]` (API.md), so `|` never occurs
 * inside a field.
 *
 * Limits (`DueEntry.limits`, issue 28) ride along as a tail `|name1,name2` appended to every
 * member (bucket, ready, in-flight), so a wheel firing an entry and a dispatcher taking one
 * know the keys of its task without reading its row. Names are `[A-Za-z0-9_.:-]`: neither
 * `|` nor `,` occurs in one. An entry without limits has no tail and encodes exactly as it did
 * before limits existed, so it costs nothing and members written earlier read back alike.
 * A task's limits never change, so the same task always makes the same member, and a store
 * still holds it once (ZADD NX, ZREM by member).
 *
 * A bucket member also carries the entry's trace context (`DueEntry.traceparent`, set only
 * while the node traces) as a last tail `@<32 hex trace id><16 hex parent id>`, so that the
 * fire of an entry the cascade or a restarted node reads back from the far buckets is still
 * the child of the task's submit span (docs/decisions/0038-tracing.md). Only a sampled context
 * is carried (an unsampled one makes no span) and it reads back as version 00, sampled: the
 * only flag a hop's span honours. `@` occurs in no other field, and the tail has one length, so
 * a reader finds it by one character at a fixed distance from the end. With tracing off no
 * entry has a context and every member is byte for byte what it was. A task's context never
 * changes either; only a node that traces writes the tail, so while tracing is turned on or off
 * across a cluster a task placed by both kinds may sit in its bucket twice and fire twice: its
 * ready queue holds it once, and a second fire after its claim is dropped by the claim, which
 * takes only a task that is pending and due. Ready and in-flight members
 * carry no context: nothing after the fire makes a span from the entry.
 */
import { WheelhouseError } from '../lib/errors.js';
import { isSampled } from '../lib/otel.js';
import type { DueEntry } from '../domain/model.js';
import type { QueueDepth } from './fast-index-types.js';

/** One minute, the width of a far time bucket. */
export const MINUTE_MS = 60_000;

/** The ready-queue priorities, lowest number first (API.md: 0–9). */
export const PRIORITIES: readonly number[] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

/** The start (Unix ms) of the minute bucket a due time falls in. */
export function minuteStart(dueMs: number): number {
  return Math.floor(dueMs / MINUTE_MS) * MINUTE_MS;
}

/**
 * Checks an entry before it is written: an integer due time (the in-flight member repeats
 * it as text, and Redis must print it back identically), a priority of 0–9, fields
 * without `|`, and limits as the task row holds them: sorted, no repeats, none empty, none
 * holding `|` or `,` (sorted, so the same task always makes the same member). A bad entry is
 * a bug upstream, so this throws `internal`.
 */
export function assertDueEntry(entry: DueEntry): void {
  if (
    !validLimits(entry.limits) ||
    !Number.isSafeInteger(entry.dueMs) ||
    !Number.isInteger(entry.priority) ||
    entry.priority < 0 ||
    entry.priority > 9 ||
    entry.taskId.length === 0 ||
    entry.taskId.includes('|') ||
    entry.taskType.length === 0 ||
    entry.taskType.includes('|')
  ) {
    throw new WheelhouseError('internal', `Not a valid due entry: ${JSON.stringify(entry)}.`, {
      details: { entry },
    });
  }
}

/** A bucket member: `taskId|priority|taskType[|limits][@trace]` (the due time is the score). */
export function encodeBucketMember(entry: DueEntry): string {
  const tail = entry.traceparent === undefined ? '' : traceTail(entry.traceparent);
  return `${entry.taskId}|${entry.priority}|${entry.taskType}${limitsTail(entry)}${tail}`;
}

/** Reads a bucket member back, with its score as the due time. Throws `internal` if malformed. */
export function decodeBucketMember(member: string, dueMs: number): DueEntry {
  if (member.charCodeAt(member.length - TRACE_TAIL_LENGTH) === AT) {
    const entry = decodeBucketMember(member.slice(0, -TRACE_TAIL_LENGTH), dueMs);
    entry.traceparent = traceparentOfTail(member, member.length - TRACE_TAIL_LENGTH + 1);
    return entry;
  }
  const first = member.indexOf('|');
  const second = member.indexOf('|', first + 1);
  const priority = Number(member.slice(first + 1, second));
  if (first <= 0 || second < 0 || !Number.isInteger(priority) || !Number.isFinite(dueMs)) {
    throw malformed('bucket', member);
  }
  const entry: DueEntry = { taskId: member.slice(0, first), priority, taskType: '', dueMs };
  return withTail(entry, member, second + 1, 'bucket');
}

/**
 * A ready-queue member: `taskId[|limits]` (the queue's name holds the type and priority, the
 * score the due time). Task ids are UUIDs of one length, so members order by task id as
 * before whatever their tails.
 */
export function encodeReadyMember(entry: DueEntry): string {
  return `${entry.taskId}${limitsTail(entry)}`;
}

/** An in-flight member: `priority|dueMs|taskId|taskType[|limits]`, enough to put it back exactly. */
export function encodeInFlightMember(entry: DueEntry): string {
  return `${entry.priority}|${entry.dueMs}|${entry.taskId}|${entry.taskType}${limitsTail(entry)}`;
}

/** Reads an in-flight member back. Throws `internal` if malformed. */
export function decodeInFlightMember(member: string): DueEntry {
  const a = member.indexOf('|');
  const b = member.indexOf('|', a + 1);
  const c = member.indexOf('|', b + 1);
  const priority = Number(member.slice(0, a));
  const dueMs = Number(member.slice(a + 1, b));
  if (a <= 0 || b < 0 || c < 0 || !Number.isInteger(priority) || !Number.isSafeInteger(dueMs)) {
    throw malformed('in-flight', member);
  }
  return withTail({ priority, dueMs, taskId: member.slice(b + 1, c), taskType: '' }, member, c + 1, 'in-flight');
}

/** The name of the queue of a task type at a priority: `priority:taskType`. */
export function queueName(taskType: string, priority: number): string {
  return `${priority}:${taskType}`;
}

/** Reads a queue name back. Task types may hold `:`, priorities may not. */
export function parseQueueName(name: string): { taskType: string; priority: number } | null {
  const colon = name.indexOf(':');
  const priority = Number(name.slice(0, colon));
  if (colon <= 0 || !Number.isInteger(priority)) return null;
  return { priority, taskType: name.slice(colon + 1) };
}

/** The order `depths` reports queues in: task type, then priority. */
export function compareQueueDepths(a: QueueDepth, b: QueueDepth): number {
  if (a.taskType !== b.taskType) return a.taskType < b.taskType ? -1 : 1;
  return a.priority - b.priority;
}

/** `@` and a trace id and a parent id: the trace tail of a bucket member. */
const AT = 0x40;
const TRACE_TAIL_LENGTH = 1 + 32 + 16;
const HEX_IDS = /^[0-9a-f]{48}$/;

/**
 * `@<trace id><parent id>` for a sampled, well-formed `traceparent` (`vv-<32>-<16>-ff`, any
 * version: the ids sit at the same places), else ''.
 */
function traceTail(traceparent: string): string {
  if (traceparent.length < 55 || !isSampled(traceparent)) return '';
  const ids = traceparent.slice(3, 35) + traceparent.slice(36, 52);
  return HEX_IDS.test(ids) ? `@${ids}` : '';
}

/** The `traceparent` a trace tail stands for, its ids starting at `from`. */
function traceparentOfTail(member: string, from: number): string {
  return `00-${member.slice(from, from + 32)}-${member.slice(from + 32, from + 48)}-01`;
}

/** `|name1,name2`, or '' for an entry without limits. */
function limitsTail(entry: DueEntry): string {
  const limits = entry.limits;
  return limits === undefined || limits.length === 0 ? '' : `|${limits.join(',')}`;
}

/**
 * Fills in `taskType` from `member[from..]`, the last field, and the limits after it when a
 * tail follows (none: no `limits` key, as the entry was written).
 */
function withTail(entry: DueEntry, member: string, from: number, kind: string): DueEntry {
  const last = lastTail;
  if (member.length - from === last.tail.length && member.startsWith(last.tail, from)) {
    entry.taskType = last.taskType;
    if (last.limits !== undefined) entry.limits = last.limits;
    return entry;
  }
  const bar = member.indexOf('|', from);
  let limits: string[] | undefined;
  if (bar < 0) entry.taskType = member.slice(from);
  else {
    entry.taskType = member.slice(from, bar);
    limits = member.slice(bar + 1).split(',');
    if (!validLimits(limits)) throw malformed(kind, member);
    entry.limits = limits;
  }
  lastTail = { tail: member.slice(from), taskType: entry.taskType, limits };
  return entry;
}

/**
 * The tail `withTail` read last, and the type and limits it gave. A fire or a take is mostly
 * runs of entries of one type and limits, and their entries share that type's string and
 * limits' array (both read-only) instead of a copy each: an entry that waits in a limit key's
 * memory (W1L: tens of thousands while submission outruns the claims) keeps three objects
 * fewer alive through the young generation's collections.
 */
let lastTail: { tail: string; taskType: string; limits: readonly string[] | undefined } = {
  tail: '\u0000',
  taskType: '',
  limits: undefined,
};

/** Absent, or non-empty names without `|` or `,`, each above the one before (sorted, no repeats). */
function validLimits(limits: readonly string[] | undefined): boolean {
  if (limits === undefined) return true;
  for (let i = 0; i < limits.length; i++) {
    const name = limits[i] as string;
    if (name.length === 0 || name.includes('|') || name.includes(',')) return false;
    if (i > 0 && !((limits[i - 1] as string) < name)) return false;
  }
  return true;
}

function malformed(kind: string, member: string): WheelhouseError {
  return new WheelhouseError('internal', `Malformed ${kind} member in the fast index: ${member}`);
}
