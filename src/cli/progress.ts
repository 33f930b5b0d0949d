/**
 * Progress of a long CLI run on stderr. On a terminal, one line redrawn in place ten times a
 * second; otherwise (a log file, CI) a plain line every few seconds, so the log shows the run
 * is alive without a line per batch.
 */

/** Where progress goes: `process.stderr`, or anything with `write` (tests). */
export interface ProgressSink {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/** What a submission has done so far. */
export interface SubmitCounts {
  /** Tasks the node created. */
  submitted: number;
  /** Non-blank lines read. */
  lines: number;
  /** Bytes of the input read. */
  bytes: number;
}

/** How often the line on a terminal is redrawn, ms. */
const TTY_EVERY_MS = 100;
/** How often a plain progress line is written when stderr is not a terminal, ms. */
const PLAIN_EVERY_MS = 5_000;

export class Progress {
  private readonly startedMs: number;
  private readonly timer: NodeJS.Timeout;
  private drawn = false;

  /**
   * @param counts read at each redraw
   * @param totalBytes the input's size when known (a file), for the percentage and the estimate of lines
   */
  constructor(
    private readonly sink: ProgressSink,
    private readonly counts: () => SubmitCounts,
    private readonly totalBytes: number | null,
    private readonly now: () => number = Date.now,
  ) {
    this.startedMs = now();
    this.timer = setInterval(() => this.draw(), sink.isTTY === true ? TTY_EVERY_MS : PLAIN_EVERY_MS);
    this.timer.unref();
  }

  /** A message of its own line; on a terminal the progress line is drawn again below it. */
  note(text: string): void {
    this.clear();
    this.sink.write(`${text}\n`);
    if (this.sink.isTTY === true) this.draw();
  }

  /** Stops redrawing and removes the progress line from a terminal, before the summary is written. */
  finish(): void {
    clearInterval(this.timer);
    this.clear();
  }

  private draw(): void {
    const text = progressLine(this.counts(), this.totalBytes, this.now() - this.startedMs);
    if (this.sink.isTTY === true) {
      this.sink.write(`\r\x1b[2K${text}`);
      this.drawn = true;
    } else {
      this.sink.write(`wheelhouse submit: ${text}\n`);
    }
  }

  private clear(): void {
    if (!this.drawn) return;
    this.sink.write('\r\x1b[2K');
    this.drawn = false;
  }
}

/**
 * `2,000 submitted · 2,500 lines read (42 %, ~6,000 in all) · 1,650 tasks/s`. The total is
 * estimated from the bytes read so far, and left out until some are.
 */
export function progressLine(counts: SubmitCounts, totalBytes: number | null, elapsedMs: number): string {
  const parts = [`${count(counts.submitted)} submitted`];
  let read = `${count(counts.lines)} lines read`;
  if (totalBytes !== null && totalBytes > 0 && counts.bytes > 0) {
    const share = Math.min(1, counts.bytes / totalBytes);
    const estimate = Math.round(counts.lines / share);
    read += ` (${Math.floor(share * 100)} %, ~${count(estimate)} in all)`;
  }
  parts.push(read, `${count(perSecond(counts.submitted, elapsedMs))} tasks/s`);
  return parts.join(' · ');
}

/** `n` per second over `elapsedMs`, whole. */
export function perSecond(n: number, elapsedMs: number): number {
  return elapsedMs <= 0 ? 0 : Math.round((n * 1000) / elapsedMs);
}

/** `1,234,567`. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}
