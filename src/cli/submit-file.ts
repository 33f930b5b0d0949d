import { open } from 'node:fs/promises';
import { resolve } from 'node:path';

import {
  createClient,
  ValidationError,
  WheelhouseApiError,
  type ClientOptions,
  type NewTask,
  type RetryInfo,
  type Submitted,
} from '../client/index.js';
import { readLines } from './ndjson.js';
import { count, perSecond, Progress, type ProgressSink, type SubmitCounts } from './progress.js';
import { taskFromLine, TaskLineError } from './task-lines.js';
import { UsageError } from './usage.js';

/**
 * `wheelhouse submit --file tasks.ndjson` (or `-` for stdin): one `POST /api/tasks` body per
 * line, blank lines skipped, sent through the client's batch route (`POST /api/tasks/batch`)
 * in batches of up to 1 000 tasks (and 8 MiB of lines), a few batches in flight at once.
 * The input is streamed: memory holds the batches in flight and the one being filled, so a
 * file of a million lines takes no more than one of a thousand.
 *
 * A batch is all or nothing on the node; the run stops at the first failure, and never sends
 * part of a batch:
 *
 * - a line that is not a task (not JSON, not an object, a field the API does not know) is
 *   found before its batch is sent: that batch is not sent, and the message names the line;
 * - a batch the node refuses (a 400 names `tasks[i]`, mapped back to the line), or that gets
 *   no answer once the client's retries (429 and 503, after `Retry-After`) are spent, is not
 *   created: no batch is sent after it.
 *
 * Either way the batches already in flight are waited for, and the summary names each batch
 * that was not created (its lines) and the line from which nothing was sent, so a rerun can
 * start there (`tail -n +<line>`); the exit code is 1. With several batches in flight, tasks
 * of different batches may be created out of file order, and a batch sent before another's
 * failure was known may still be created after it (`--concurrency 1` keeps file order).
 */

/** Most tasks in one batch (the batch route's limit). */
export const MAX_BATCH_TASKS = 1000;
/** A batch is sent once its lines reach this size, well under the node's 16 MiB batch body limit. */
const MAX_BATCH_BYTES = 8 * 1024 * 1024;

export interface SubmitFileOptions {
  /** A path (from the working directory) or `-` for stdin. */
  file: string;
  /** Tasks per batch, 1–1000. @default 1000 */
  batchSize: number;
  /** Batches in flight at once. @default 4 */
  concurrency: number;
  /** Write each created task as a JSON line to `out`. */
  ids: boolean;
}

/** A batch the node did not create, or the line that stopped the run. */
export interface BatchFailure {
  /** The first and last line of the batch (the bad line alone, for a line that is not a task). */
  fromLine: number;
  toLine: number;
  /** The line the error is about, when it names one. */
  line: number | null;
  message: string;
}

export interface SubmitSummary {
  /** Tasks the node created. */
  submitted: number;
  /** Lines taken that did not become tasks. */
  failed: number;
  /** Non-blank lines taken (read before the run stopped). */
  lines: number;
  /**
   * The run stopped early: no line from this one on was sent (every line before it was, in a
   * batch that was created or is in `failures`). null when the whole input was sent.
   */
  notSentFromLine: number | null;
  elapsedMs: number;
  /** Tasks created per second. */
  perSecond: number;
  failures: BatchFailure[];
}

interface Batch {
  tasks: NewTask[];
  /** The line number of each task. */
  lines: number[];
  bytes: number;
}

const emptyBatch = (): Batch => ({ tasks: [], lines: [], bytes: 0 });

/** Reads the input, submits it, and resolves with the summary (failures included: it does not throw for them). */
export async function submitFile(
  connection: Omit<ClientOptions, 'onRetry'>,
  options: SubmitFileOptions,
  io: { out: (text: string) => void; stderr: ProgressSink; stdin: AsyncIterable<Buffer | string> },
): Promise<SubmitSummary> {
  const { input, totalBytes, close } = await openInput(options.file, io.stdin);
  const counts: SubmitCounts = { submitted: 0, lines: 0, bytes: 0 };
  const failures: BatchFailure[] = [];
  const inFlight = new Set<Promise<void>>();
  const progress = new Progress(io.stderr, () => counts, totalBytes);
  const client = createClient({ ...connection, onRetry: (info) => progress.note(retryNote(info)) });
  const startedMs = Date.now();
  let notSentFromLine: number | null = null;

  /** Sends `batch` once a slot is free; false, sending nothing, when a batch failed meanwhile. */
  const send = async (batch: Batch): Promise<boolean> => {
    while (inFlight.size >= options.concurrency) await Promise.race(inFlight);
    if (failures.length > 0) return false;
    const sent = client.submitBatch(batch.tasks).then(
      (created) => {
        counts.submitted += created.length;
        if (options.ids) io.out(created.map((t, i) => idLine(batch.lines[i], t)).join(''));
      },
      (error: unknown) => {
        const fromLine = batch.lines[0] as number;
        failures.push({ fromLine, toLine: batch.lines.at(-1) as number, ...batchError(error, batch) });
      },
    );
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
    return true;
  };

  try {
    let batch = emptyBatch();
    for await (const line of readLines(input)) {
      counts.bytes += line.bytes;
      if (line.text.trim() === '') continue;
      if (failures.length > 0) {
        // A batch in flight failed: send nothing more.
        notSentFromLine = batch.lines[0] ?? line.number;
        break;
      }
      counts.lines++;
      let task: NewTask;
      try {
        task = taskFromLine(line.text);
      } catch (error) {
        if (!(error instanceof TaskLineError)) throw error;
        failures.push({ fromLine: line.number, toLine: line.number, line: line.number, message: error.message });
        notSentFromLine = batch.lines[0] ?? line.number;
        break;
      }
      batch.tasks.push(task);
      batch.lines.push(line.number);
      batch.bytes += line.bytes;
      if (batch.tasks.length >= options.batchSize || batch.bytes >= MAX_BATCH_BYTES) {
        if (!(await send(batch))) {
          notSentFromLine = batch.lines[0] as number;
          break;
        }
        batch = emptyBatch();
      }
    }
    if (notSentFromLine === null && batch.tasks.length > 0 && !(await send(batch))) {
      notSentFromLine = batch.lines[0] as number;
    }
    while (inFlight.size > 0) await Promise.all(inFlight);
  } finally {
    progress.finish();
    await close();
  }
  const elapsedMs = Date.now() - startedMs;
  return {
    submitted: counts.submitted,
    failed: counts.lines - counts.submitted,
    lines: counts.lines,
    notSentFromLine,
    elapsedMs,
    perSecond: perSecond(counts.submitted, elapsedMs),
    failures,
  };
}

/** One created task as a JSON line: its line, and the API's own fields for it. */
function idLine(line: number | undefined, t: Submitted): string {
  return `${JSON.stringify({ line, task_id: t.taskId, status: t.status, due_time: t.dueTime })}\n`;
}

/** The summary as `--json` prints it: snake_case, as the API writes its fields. */
export function summaryJson(s: SubmitSummary): Record<string, unknown> {
  return {
    submitted: s.submitted,
    failed: s.failed,
    lines: s.lines,
    not_sent_from_line: s.notSentFromLine,
    elapsed_ms: s.elapsedMs,
    per_second: s.perSecond,
    failures: s.failures.map((f) => ({ from_line: f.fromLine, to_line: f.toLine, line: f.line, message: f.message })),
  };
}

/** The summary for people: a first line with the counts, then one per failure. */
export function summaryText(s: SubmitSummary): string {
  const seconds = (s.elapsedMs / 1000).toFixed(1);
  let text =
    `submitted ${count(s.submitted)} of ${count(s.lines)} tasks in ${seconds} s (${count(s.perSecond)} tasks/s)` +
    (s.failed > 0 ? `; ${count(s.failed)} not submitted` : '') +
    '\n';
  for (const f of s.failures) text += `  ${describeFailure(f)}\n`;
  if (s.notSentFromLine !== null) text += `  stopped: nothing from line ${s.notSentFromLine} on was sent\n`;
  return text;
}

/** What the client's retries tell the progress output. */
function retryNote(info: RetryInfo): string {
  const why = info.status === null ? 'no answer' : `${info.status}`;
  return `wheelhouse submit: ${info.path} ${why}, retry ${info.attempt} in ${Math.round(info.delayMs)} ms`;
}

function describeFailure(f: BatchFailure): string {
  if (f.line !== null && f.fromLine === f.toLine) return `line ${f.line}: ${f.message}`;
  const batch = `lines ${f.fromLine}–${f.toLine} were not created`;
  return f.line === null ? `${f.message}; ${batch}` : `line ${f.line}: ${f.message}; its batch, ${batch}`;
}

/**
 * The node's reason for refusing a batch, about the line when it names a task: a 400's
 * `tasks[3].priority: …` becomes `priority: …` of the fourth line of the batch.
 */
function batchError(error: unknown, batch: Batch): { line: number | null; message: string } {
  if (error instanceof ValidationError && error.index !== null && batch.lines[error.index] !== undefined) {
    const message = serverMessage(error)
      .replace(/^tasks\[\d+\]\.?/, '')
      .replace(/^:\s*/, '');
    return { line: batch.lines[error.index] as number, message: `${message} (${error.code})` };
  }
  if (error instanceof WheelhouseApiError)
    return { line: null, message: `${error.status} ${error.code}: ${serverMessage(error)}` };
  return { line: null, message: error instanceof Error ? error.message : String(error) };
}

/** The node's own message, without the client's `POST /path answered 400 code:` prefix. */
function serverMessage(error: WheelhouseApiError): string {
  const prefix = `${error.method} ${error.path} answered ${error.status} ${error.code}: `;
  return error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
}

async function openInput(
  file: string,
  stdin: AsyncIterable<Buffer | string>,
): Promise<{ input: AsyncIterable<Buffer | string>; totalBytes: number | null; close: () => Promise<void> }> {
  if (file === '-') return { input: stdin, totalBytes: null, close: async () => {} };
  const path = resolve(file);
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new UsageError(`--file ${file}: ${reason} (${path})`, { usage: null, cause: error });
  }
  const stat = await handle.stat();
  if (!stat.isFile()) {
    await handle.close();
    throw new UsageError(`--file ${file}: not a file (${path})`, { usage: null });
  }
  return { input: handle.createReadStream(), totalBytes: stat.size, close: () => handle.close() };
}
