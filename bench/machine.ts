import { cpus, loadavg, release, totalmem, type as osType } from 'node:os';

/** What the benchmark ran on, for the report. */
export interface Machine {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  date: string;
  /** 1-minute load average when the benchmark started: other work on the machine skews every figure. */
  loadAvg1m: number;
}

export function describeMachine(now = new Date()): Machine {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${osType()} ${release()}`,
    node: process.version,
    date: now.toISOString(),
    loadAvg1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  };
}
