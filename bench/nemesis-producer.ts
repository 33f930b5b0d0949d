/**
 * The producers of the nemesis (bench/nemesis.ts): a steady mix of immediate, delayed,
 * limited and DAG submissions, spread over the nodes, each retried — with its idempotency key,
 * on the next node — on a 429, a 503, any other 5xx or a network error, until it is
 * acknowledged or gives up. Every acknowledgement is a line of the producer's log (the
 * history checker's record of what Wheelhouse promised to run); so is every give-up.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { Agent, request } from 'undici';
import { sleep } from './time.js';

export const PLAIN_TYPE = 'nem.plain';
export const LIMITED_TYPE = 'nem.limited';
export const DAG_TYPE = 'nem.dag';
export const CRON_TYPE = 'nem.cron';
export const NEMESIS_TYPES = [PLAIN_TYPE, LIMITED_TYPE, DAG_TYPE, CRON_TYPE];

/** The family every limited task takes a key of, and the keys used. */
export const LIMIT_FAMILY = 'nem:*';
export const LIMIT_KEYS = 8;
/** Every task's lease: a task whose worker or node died comes back this long after its claim. */
export const LEASE_SECONDS = 5;
const MAX_RETRIES = 100;
/** A submission is abandoned after this long (counted as given up). */
const GIVE_UP_MS = 120_000;
const MAX_IN_FLIGHT = 64;

type Answer = { status: number; body: Record<string, unknown> };

export class Producer {
  private readonly fd: number;
  private readonly agent = new Agent({ connections: 32, headersTimeout: 10_000, bodyTimeout: 10_000 });
  private readonly inFlight = new Set<Promise<void>>();
  private next = 0;
  private running = true;
  private loop: Promise<void> | undefined;
  readonly answers: Record<string, number> = {};

  constructor(
    private readonly urls: readonly string[],
    logFile: string,
    private readonly runId: string,
  ) {
    this.fd = openSync(logFile, 'a');
  }

  private write(record: Record<string, unknown>): void {
    writeSync(this.fd, `${JSON.stringify({ ...record, t: Date.now() })}\n`);
  }

  /** POSTs `body` to `path` until acknowledged; null when it gave up. */
  private async submit(path: string, body: Record<string, unknown>): Promise<Answer | null> {
    const deadline = Date.now() + GIVE_UP_MS;
    let last = 'none';
    for (let i = this.next++; Date.now() < deadline; i++) {
      const url = this.urls[i % this.urls.length] as string;
      try {
        const res = await request(`${url}${path}`, {
          method: 'POST',
          dispatcher: this.agent,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const answer = { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
        this.answers[res.statusCode] = (this.answers[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 200 || res.statusCode === 201) return answer;
        last = `${res.statusCode} ${JSON.stringify(answer.body).slice(0, 200)}`;
        if (res.statusCode < 500 && res.statusCode !== 429) break;
      } catch (error) {
        last = (error as Error).message;
        this.answers.network = (this.answers.network ?? 0) + 1;
      }
      await sleep(200 + Math.random() * 300);
    }
    this.write({ ev: 'gave_up', idem: body.idempotency_key, kind: path, last });
    return null;
  }

  private task(type: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { task_type: type, timeout_seconds: LEASE_SECONDS, max_retries: MAX_RETRIES, ...extra };
  }

  private async one(): Promise<void> {
    const idem = `${this.runId}-${randomBytes(8).toString('hex')}`;
    const roll = Math.random();
    if (roll < 0.15) {
      const node = (ref: string, deps: string[]) => ({ ...this.task(DAG_TYPE), ref, depends_on: deps });
      const answer = await this.submit('/api/dags', {
        idempotency_key: idem,
        tasks: [node('a', []), node('b', ['a']), node('c', ['a']), node('d', ['b', 'c'])],
      });
      if (answer === null) return;
      const deps: Record<string, string[]> = { a: [], b: ['a'], c: ['a'], d: ['b', 'c'] };
      const tasks = answer.body.tasks as { ref: string; task_id: string }[];
      this.write({
        ev: 'dag',
        dag_id: answer.body.dag_id,
        nodes: tasks.map((t) => ({ ref: t.ref, task_id: t.task_id, deps: deps[t.ref] })),
      });
      return;
    }
    const delayed = roll < 0.4;
    const limited = roll >= 0.7;
    const delaySeconds = delayed ? 1 + Math.random() * 19 : 0;
    const schedule = delayed ? { type: 'delayed', delay_seconds: delaySeconds } : { type: 'immediate' };
    const limits = limited ? [`nem:${Math.floor(Math.random() * LIMIT_KEYS)}`] : undefined;
    const sentAt = Date.now();
    const answer = await this.submit(
      '/api/tasks',
      this.task(limited ? LIMITED_TYPE : PLAIN_TYPE, {
        idempotency_key: idem,
        schedule,
        ...(limits === undefined ? {} : { limits }),
      }),
    );
    if (answer === null) return;
    this.write({
      ev: 'ack',
      task_id: answer.body.task_id,
      idem,
      kind: limited ? 'limited' : delayed ? 'delayed' : 'immediate',
      due_ms: sentAt + delaySeconds * 1000,
    });
  }

  /** Cron schedules firing every `seconds` until `endMs`. */
  async schedules(everySeconds: readonly number[], endMs: number): Promise<void> {
    for (const seconds of everySeconds) {
      const expr = seconds === 1 ? '* * * * * *' : `*/${seconds} * * * * *`;
      const answer = await this.submit(
        '/api/tasks',
        this.task(CRON_TYPE, {
          idempotency_key: `${this.runId}-cron-${seconds}`,
          schedule: { type: 'cron', cron_expression: expr, end_time: new Date(endMs).toISOString() },
        }),
      );
      if (answer === null) throw new Error(`the cron schedule every ${seconds} s was never acknowledged`);
      this.write({ ev: 'cron', schedule_id: answer.body.task_id, expr, every_ms: seconds * 1000, end_ms: endMs });
    }
  }

  /** Submits about `perSecond` a second until `stop()`. */
  start(perSecond: number): void {
    this.loop = (async () => {
      const tickMs = 100;
      let owed = 0;
      while (this.running) {
        owed += (perSecond * tickMs) / 1000;
        for (; owed >= 1 && this.inFlight.size < MAX_IN_FLIGHT; owed--) {
          const p: Promise<void> = this.one().finally(() => this.inFlight.delete(p));
          this.inFlight.add(p);
        }
        owed = Math.min(owed, perSecond);
        await sleep(tickMs);
      }
    })();
  }

  /** Stops submitting; resolves once every submission in flight is acknowledged or given up. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await Promise.all(this.inFlight);
    closeSync(this.fd);
    await this.agent.close();
  }
}
