import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Resident set size of a process, KiB; null when it is gone. Linux /proc first, `ps` elsewhere. */
export function rssKiB(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) : null;
  } catch {
    try {
      const out = execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim();
      return out === '' ? null : Number(out);
    } catch {
      return null;
    }
  }
}

/** Samples a process's RSS every `everyMs` and keeps the maximum since the last `reset()`. */
export class RssSampler {
  private maxKiB = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    everyMs = 200,
  ) {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  sample(): void {
    const kib = rssKiB(this.pid);
    if (kib !== null && kib > this.maxKiB) this.maxKiB = kib;
  }

  reset(): void {
    this.maxKiB = 0;
    this.sample();
  }

  /** Largest sample since the last reset, MiB. */
  get maxMiB(): number {
    this.sample();
    return this.maxKiB / 1024;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
