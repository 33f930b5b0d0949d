import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { RawWorker } from './raw-worker.js';
import { uniqueType } from './tasks.js';
import { eventually } from './waits.js';

/**
 * The close test of issue 27 ("the channel strands nothing"), shared by the one-node and the
 * three-node files: a worker socket closes in each state it can be in — credit granted and
 * nothing pushed; tasks pushed and no result sent; a result sent and the socket closed before
 * its ack — and within a second each task is where it belongs: recorded (`succeeded`), or
 * back in its queue with its attempt not counted and handed to a second worker with credit.
 */

/** How the worker closes: a plain close, a close whose handshake the worker never finishes, `goodbye` then close. */
export type CloseHow = 'plain' | 'held' | 'goodbye';
export const CLOSES: CloseHow[] = ['plain', 'held', 'goodbye'];

/** Where the test's sockets go and where it submits (three nodes: a socket each on two, submits on the third). */
export interface CloseTestNodes {
  /** The closing worker's node. */
  closing: string;
  /** The second worker's node. */
  other: string;
  /** Where tasks are submitted and read. */
  api: string;
  /** Workers opened, terminated after the test. */
  opened: RawWorker[];
  /** The workers tasks were claimed for, as the node's events tell (one node only). */
  claimedFor?: string[];
}

interface TaskJson {
  status: string;
  attempts: number;
}

async function call<T>(url: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

async function submit(url: string, type: string, n: number): Promise<string[]> {
  const res = await call<{ tasks: { task_id: string }[] }>(url, 'POST', '/api/tasks/batch', {
    tasks: Array.from({ length: n }, () => ({ task_type: type })),
  });
  return res.tasks.map((t) => t.task_id);
}

async function hello(n: CloseTestNodes, url: string, type: string, credits: number, id = `w-${randomUUID()}`) {
  const { worker } = await RawWorker.hello(url, { worker_id: id, task_types: [type], credits });
  n.opened.push(worker);
  return worker;
}

async function close(worker: RawWorker, how: CloseHow): Promise<void> {
  if (how === 'held') return worker.closeHeld();
  if (how === 'goodbye') worker.send({ type: 'goodbye' });
  worker.close();
}

/**
 * Within a second: every task of `handedOn` was received by `second` as attempt 1 and runs with
 * one attempt counted, and every task of `recorded` succeeded.
 */
async function settled(
  n: CloseTestNodes,
  second: RawWorker,
  handedOn: readonly string[],
  recorded: readonly string[] = [],
): Promise<void> {
  const where = async (): Promise<string> => {
    const lines: string[] = [];
    for (const id of handedOn) {
      const task = await call<TaskJson>(n.api, 'GET', `/api/tasks/${id}`);
      const got = second.tasks.find((t) => t.task_id === id);
      lines.push(
        `${id}: ${task.status}, attempts ${task.attempts}, second worker: ${got ? `attempt ${got.attempt}` : 'no'}`,
      );
    }
    for (const id of recorded) {
      const task = await call<TaskJson>(n.api, 'GET', `/api/tasks/${id}`);
      lines.push(`${id}: ${task.status}, attempts ${task.attempts} (its result was sent)`);
    }
    return lines.join('\n');
  };
  const ok = async (): Promise<true | undefined> => {
    for (const id of handedOn) {
      const got = second.tasks.find((t) => t.task_id === id);
      if (got?.attempt !== 1) return undefined;
      const task = await call<TaskJson>(n.api, 'GET', `/api/tasks/${id}`);
      if (task.status !== 'running' || task.attempts !== 1) return undefined;
    }
    for (const id of recorded) {
      const task = await call<TaskJson>(n.api, 'GET', `/api/tasks/${id}`);
      if (task.status !== 'succeeded' || task.attempts !== 1) return undefined;
    }
    return true;
  };
  try {
    await eventually(ok, 1_000, 'every task handed on or recorded');
  } catch (error) {
    throw new Error(`${(error as Error).message}; where the tasks are:\n${await where()}`);
  }
}

/** Credit granted, nothing pushed yet: the socket closes, then tasks arrive; none is claimed for it. */
export async function creditOnly(n: CloseTestNodes, how: CloseHow): Promise<void> {
  const type = uniqueType(`close-credit-${how}`);
  const firstId = `w-${randomUUID()}`;
  const first = await hello(n, n.closing, type, 3, firstId);
  const second = await hello(n, n.other, type, 3);
  await close(first, how);
  const ids = await submit(n.api, type, 3);
  await settled(n, second, ids);
  expect(first.tasks.filter((t) => ids.includes(t.task_id))).toEqual([]);
  // The node had read the close frame before the tasks came: it claimed nothing for that socket.
  if (how === 'held') expect(n.claimedFor ?? []).not.toContain(firstId);
}

/** Tasks pushed, no result sent: the socket closes and they go back at once, to the second worker. */
export async function pushedNoResult(n: CloseTestNodes, how: CloseHow): Promise<void> {
  const type = uniqueType(`close-pushed-${how}`);
  const first = await hello(n, n.closing, type, 2);
  const ids = await submit(n.api, type, 2);
  await first.received(2);
  const second = await hello(n, n.other, type, 0);
  second.send({ type: 'credit', n: 2 });
  await close(first, how);
  await settled(n, second, ids);
}

/** A result sent, the socket closed before its ack: that task is recorded, the other goes back. */
export async function midResult(n: CloseTestNodes, how: CloseHow): Promise<void> {
  const type = uniqueType(`close-mid-${how}`);
  const first = await hello(n, n.closing, type, 2);
  await submit(n.api, type, 2);
  const [done, left] = await first.received(2);
  const second = await hello(n, n.other, type, 0);
  second.send({ type: 'credit', n: 2 });
  first.send({
    type: 'results',
    results: [{ task_id: done!.task_id, lease_token: done!.lease_token, status: 'succeeded', result: { ok: 1 } }],
  });
  await close(first, how);
  await settled(n, second, [left!.task_id], [done!.task_id]);
}
