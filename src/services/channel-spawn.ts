import type { ChildSpec } from '../domain/specs.js';
import { WheelhouseError } from '../lib/errors.js';
import type { ChildrenApi } from './types.js';
import type { NodeFrame } from './worker-session.js';

/**
 * The worker channel's `spawn` (API.md, "Children of a running task"): the children go to the
 * service of `POST /api/tasks/{id}/children`, and the answer is a `spawned` frame with the
 * request's id, carrying the children or the error as a request on the channel reports one
 * without closing the socket (as an ack carries the error of a result it could not record).
 */

/** A `spawn` frame: children for the running task `parentId`, whose lease the worker shows. */
export interface ChannelSpawn {
  requestId: string;
  parentId: string;
  leaseToken: string;
  /** The children, or why the frame's children were refused (answered as the spawn's error). */
  children: ChildSpec[] | WheelhouseError;
}

/** The `spawned` frame that answers `spawn`; never rejects. */
export async function spawnAnswer(
  service: Pick<ChildrenApi, 'spawnChildren'>,
  { requestId, parentId, leaseToken, children }: ChannelSpawn,
): Promise<NodeFrame> {
  if (children instanceof WheelhouseError) return { type: 'spawned', requestId, error: children };
  try {
    return { type: 'spawned', requestId, tasks: await service.spawnChildren(parentId, leaseToken, children) };
  } catch (error) {
    const known = error instanceof WheelhouseError;
    return {
      type: 'spawned',
      requestId,
      error: known ? error : new WheelhouseError('internal', 'spawning children failed', { cause: error }),
    };
  }
}
