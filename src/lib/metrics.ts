/**
 * A small Prometheus registry: counters and gauges with optional labels, rendered in the
 * text exposition format. Enough for /metrics without a dependency.
 */
type Labels = Record<string, string>;

interface Series {
  help: string;
  type: 'counter' | 'gauge';
  values: Map<string, number>;
}

export class Metrics {
  private readonly series = new Map<string, Series>();
  private readonly collectors: (() => Promise<void> | void)[] = [];

  counter(name: string, help: string): (by?: number, labels?: Labels) => void {
    const s = this.define(name, help, 'counter');
    return (by = 1, labels) => {
      const key = labelKey(labels);
      s.values.set(key, (s.values.get(key) ?? 0) + by);
    };
  }

  gauge(name: string, help: string): (value: number, labels?: Labels) => void {
    const s = this.define(name, help, 'gauge');
    return (value, labels) => {
      s.values.set(labelKey(labels), value);
    };
  }

  /** Runs before each render, to refresh gauges that are read from elsewhere. */
  onCollect(collector: () => Promise<void> | void): void {
    this.collectors.push(collector);
  }

  /** The value of one series (tests and the dashboard read it). */
  value(name: string, labels?: Labels): number {
    return this.series.get(name)?.values.get(labelKey(labels)) ?? 0;
  }

  async render(): Promise<string> {
    for (const collect of this.collectors) await collect();
    const lines: string[] = [];
    for (const [name, s] of this.series) {
      lines.push(`# HELP ${name} ${s.help}`, `# TYPE ${name} ${s.type}`);
      if (s.values.size === 0 && s.type === 'counter') lines.push(`${name} 0`);
      for (const [key, value] of s.values) lines.push(`${name}${key} ${value}`);
    }
    return `${lines.join('\n')}\n`;
  }

  private define(name: string, help: string, type: Series['type']): Series {
    let s = this.series.get(name);
    if (!s) {
      s = { help, type, values: new Map() };
      this.series.set(name, s);
    }
    return s;
  }
}

function labelKey(labels: Labels | undefined): string {
  if (!labels) return '';
  const parts = Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}
