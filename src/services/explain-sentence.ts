import type { Explanation } from './explanation.js';

/**
 * One plain-English sentence from the facts of an explanation, nothing else: what the task
 * waits for, or how it ended.
 */
export function explainSentence(facts: Omit<Explanation, 'sentence'>): string {
  const sentence = stateSentence(facts);
  return facts.startByMs === null ? sentence : `${sentence} It expires unless it starts by ${iso(facts.startByMs)}.`;
}

function stateSentence(facts: Omit<Explanation, 'sentence'>): string {
  const { due, queue, lease, backoff, schedule, outcome, dependencies } = facts;
  switch (facts.state) {
    case 'scheduled':
      return `Due in ${duration(due?.dueInMs ?? 0)} (at ${iso(due?.dueMs)}) ${partition(due)}.`;
    case 'backing_off':
      return (
        `Backing off after attempt ${backoff?.attempt ?? 0} failed` +
        (backoff?.lastError ? ` (${quote(backoff.lastError)})` : '') +
        `: runs again in ${duration(due?.dueInMs ?? 0)} (at ${iso(backoff?.untilMs)}) ${partition(due)}.`
      );
    case 'ready': {
      const held = limitClauses(facts.limits);
      if (held !== null) return `${held}; ${workers(queue)}.`;
      const where =
        queue?.ahead === null || queue === null
          ? `Due, and not in the ready queue yet: ${partition(due).replace(/^on /, '')} is handing it over`
          : queue.ahead === 0
            ? `Ready, first in line for ${queue.taskType} (priority ${queue.priority})`
            : `Ready, behind ${count(queue.ahead, 'task')} of type ${queue.taskType} at priority ${queue.priority} or more urgent`;
      return `${where}; ${workers(queue)}.`;
    }
    case 'waiting': {
      if (facts.children !== undefined) {
        const { open, total } = facts.children;
        return `Waiting for ${open} of ${count(total, 'child', 'children')}: it runs again once all have ended, and holds no worker meanwhile.`;
      }
      const list = dependencies ?? [];
      const open = list.filter((d) => d.status !== 'succeeded');
      const named = open
        .slice(0, 3)
        .map((d) => `${d.taskId} (${d.status})`)
        .join(', ');
      return list.length === 0
        ? 'Waiting on its predecessors.'
        : `Waiting on ${count(open.length, 'predecessor')} of ${list.length}: ${named}${open.length > 3 ? ', …' : ''}.`;
    }
    case 'running':
      return (
        `Held by worker ${lease?.workerId ?? 'unknown'} since ${iso(lease?.sinceMs)}, deadline ${iso(lease?.deadlineMs)}, lease until ${iso(lease?.leaseExpiresMs)}` +
        (lease?.lastHeartbeatMs ? `, last heartbeat at ${iso(lease.lastHeartbeatMs)}` : ', no heartbeat yet') +
        (lease?.ownerNode ? ` (lease kept by node ${lease.ownerNode})` : '') +
        '.'
      );
    case 'paused':
      return 'The schedule is paused: it fires no instance until it is resumed.';
    case 'active':
      return `The schedule is active: next fire at ${iso(schedule?.nextDueMs)}.`;
    case 'succeeded':
      return `Succeeded at ${iso(outcome?.finishedMs)}: ${outcome?.reason ?? ''}.`;
    case 'failed':
      return `Failed at ${iso(outcome?.finishedMs)}: ${outcome?.reason ?? ''}${outcome?.error ? ` (${quote(outcome.error)})` : ''}.`;
    case 'cancelled':
      return `Cancelled at ${iso(outcome?.finishedMs)}: ${outcome?.reason ?? ''}.`;
    case 'expired':
      return `Expired at ${iso(outcome?.finishedMs)}: ${outcome?.reason ?? ''}.`;
  }
}

/**
 * What the gated keys that hold a due task hold it by, the most lasting first (a pause, then a
 * full key, then a rate): `Paused: \`type:email.send\` has concurrency 0`, `Waiting for a slot
 * of \`customer:42\` (5 of 5 running)`, `Throttled by \`stripe-api\` until …`. Null when no key
 * holds it (none is gated, or each has room).
 */
function limitClauses(limits: Omit<Explanation, 'sentence'>['limits']): string | null {
  if (limits === null) return null;
  const order = { paused: 0, full: 1, throttled: 2 } as const;
  const holding = limits
    .filter((l) => l.holds === 'paused' || l.holds === 'full' || l.holds === 'throttled')
    .sort((a, b) => order[a.holds as keyof typeof order] - order[b.holds as keyof typeof order]);
  if (holding.length === 0) return null;
  const clauses = holding.map((l) =>
    l.holds === 'paused'
      ? `paused: \`${l.name}\` has concurrency 0`
      : l.holds === 'full'
        ? `waiting for a slot of \`${l.name}\` (${l.running ?? 0} of ${l.concurrency ?? 0} running)`
        : `throttled by \`${l.name}\` until ${iso(l.throttledUntilMs)}`,
  );
  const text = clauses.join('; and ');
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}

function partition(due: Omit<Explanation, 'sentence'>['due']): string {
  if (due === null) return '';
  const epoch = due.epoch === null ? '' : ` (epoch ${due.epoch})`;
  return `on partition ${due.partition}, owned by node ${due.ownerNode}${epoch}`;
}

function workers(queue: Omit<Explanation, 'sentence'>['queue']): string {
  if (queue === null) return 'no worker information';
  const w = queue.workers;
  const asked =
    w.lastAskedMs === null ? 'none has asked since the nodes started' : `one last asked at ${iso(w.lastAskedMs)}`;
  if (w.connected === 0 && w.polling === 0) return `no worker for ${queue.taskType} is connected or polling, ${asked}`;
  return `${count(w.connected, 'worker')} connected and ${w.polling} polling for ${queue.taskType}, ${asked}`;
}

function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

/** A duration for people: ms below a second, then s, min, h, d. */
function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

function iso(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? 'an unknown time' : new Date(ms).toISOString();
}

/** An error message inside a sentence: one line, at most 200 characters. */
function quote(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}
