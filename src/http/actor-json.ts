import type { ActorInfo } from '../runtime/actor.js';

/** An actor as `/admin/actors` answers it (AdminActorSchema). */
export interface AdminActorJson {
  kind: string;
  key: string;
  node: string;
  mailbox_depth: number;
  activated_at: string;
  last_message_at: string | null;
  epoch: number;
  snapshot_version: number | null;
  state?: unknown;
}

/**
 * The runtime's description of an actor in the API's snake_case: its own fields, and the field
 * names of its state (what each kind's `describe` shows, written in the code's camelCase).
 */
export function adminActorJson(info: ActorInfo): AdminActorJson {
  const out: AdminActorJson = {
    kind: info.kind,
    key: info.key,
    node: info.node,
    mailbox_depth: info.mailboxDepth,
    activated_at: info.activatedAt,
    last_message_at: info.lastMessageAt,
    epoch: info.epoch,
    snapshot_version: info.snapshotVersion,
  };
  if (info.state !== undefined) out.state = snakeFieldNames(info.state);
  return out;
}

/** A field name in camelCase (`nearWheelSize`); a key that is data (an id, `customer:42`) is not one. */
const CAMEL_FIELD = /^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$/;

/** `value` with the camelCase field names of its objects, at any depth, in snake_case. */
export function snakeFieldNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeFieldNames);
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    const name = CAMEL_FIELD.test(key) ? key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : key;
    out[name] = snakeFieldNames(member);
  }
  return out;
}
