import { UNAVAILABLE_CODES } from '../lib/unavailable-codes.js';
import type { WireAck, WireLease } from './channel-wire.js';
import type { WireResult } from './wire.js';

/**
 * The channel worker's results on their way to the node: waiting to be sent, then sent and
 * waiting for their acks. Each result's JSON is made once, when it is added, and reused when a
 * reconnect sends it again. Frames hold at most `maxBatchSize` results and
 * `MAX_RESULTS_FRAME_BYTES` of them, so large results never trip the node's frame limit.
 */

/**
 * Most bytes of results in one `results` frame: the node closes a socket whose frame is over
 * its `workerFrameMaxBytes` (16 MiB by default).
 */
const MAX_RESULTS_FRAME_BYTES = 8 * 1024 * 1024;

/**
 * Whether an `ok: false` ack's code means the node could not record the result now (its store
 * out, the cluster moving) and kept its lease: the result is sent again. Any other refusal
 * (`lease_lost`) is final.
 */
function sendAgain(code: string): boolean {
  return UNAVAILABLE_CODES.has(code) || code === 'internal';
}

interface Outgoing {
  readonly wire: WireResult;
  readonly json: string;
  readonly bytes: number;
}

export class ChannelResults {
  /** Not sent yet, by task id. */
  private readonly waiting = new Map<string, Outgoing>();
  /** Sent on the current socket and not acknowledged yet, by task id. */
  private readonly unacked = new Map<string, Outgoing>();

  constructor(private readonly maxBatchSize: number) {}

  /** Results waiting or unacknowledged. */
  get size(): number {
    return this.waiting.size + this.unacked.size;
  }

  /** Results not sent yet. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  add(wire: WireResult): void {
    const json = JSON.stringify(wire);
    this.waiting.set(wire.task_id, { wire, json, bytes: Buffer.byteLength(json) });
  }

  /** Drops a result not sent yet (its lease was lost); true when there was one. */
  dropWaiting(taskId: string): boolean {
    return this.waiting.delete(taskId);
  }

  /** Hands every waiting result to `sendFrame` as the text of `results` frames; returns how many frames. */
  send(sendFrame: (text: string) => void): number {
    let frames = 0;
    let parts: string[] = [];
    let bytes = 0;
    const flush = (): void => {
      sendFrame(`{"type":"results","results":[${parts.join(',')}]}`);
      frames++;
      parts = [];
      bytes = 0;
    };
    for (const [taskId, r] of this.waiting) {
      if (parts.length === this.maxBatchSize || (parts.length > 0 && bytes + r.bytes > MAX_RESULTS_FRAME_BYTES))
        flush();
      parts.push(r.json);
      bytes += r.bytes + 1;
      this.unacked.set(taskId, r);
    }
    this.waiting.clear();
    if (parts.length > 0) flush();
    return frames;
  }

  /**
   * Applies an `acks` frame: how many results the node accepted and refused, each also told to
   * `each`, and how many it could not record now (a code `sendAgain` names): those wait to be sent
   * again and are not told. Acks of unknown ids are ignored.
   */
  ack(
    acks: readonly WireAck[],
    each: (taskId: string, ok: boolean) => void,
  ): { accepted: number; refused: number; again: number; againCode: string | null } {
    let accepted = 0;
    let refused = 0;
    let again = 0;
    let againCode: string | null = null;
    for (const a of acks) {
      const r = this.unacked.get(a.task_id);
      if (r === undefined) continue;
      this.unacked.delete(a.task_id);
      if (!a.ok && a.error !== undefined && sendAgain(a.error.code)) {
        this.waiting.set(a.task_id, r);
        again++;
        againCode ??= a.error.code;
        continue;
      }
      if (a.ok) accepted++;
      else refused++;
      each(a.task_id, a.ok);
    }
    return { accepted, refused, again, againCode };
  }

  /** The socket is gone: what it was sent and did not acknowledge waits to be sent again. */
  requeue(): void {
    for (const [taskId, r] of this.unacked) this.waiting.set(taskId, r);
    this.unacked.clear();
  }

  /** The leases of every result still on its way (a new socket resumes them). */
  leases(): WireLease[] {
    return [...this.waiting.values(), ...this.unacked.values()].map(({ wire }) => ({
      task_id: wire.task_id,
      lease_token: wire.lease_token,
    }));
  }

  /** Drops everything; returns the task ids of the results dropped: those never sent, and those sent and not acknowledged. */
  clear(): { unsent: string[]; unacknowledged: string[] } {
    const dropped = { unsent: [...this.waiting.keys()], unacknowledged: [...this.unacked.keys()] };
    this.waiting.clear();
    this.unacked.clear();
    return dropped;
  }
}
