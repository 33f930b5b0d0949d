/**
 * The soak's plot: one small SVG with three panels over the run's minutes — node RSS (MiB),
 * start lag p99 (ms) and Postgres table sizes (MiB) — each scaled to its own range, with the
 * 10-minute reference drawn where the flatness bars are measured from. Plain SVG text, no
 * dependency, readable on GitHub.
 */
export interface SoakSample {
  minute: number;
  /** The median of the minute's RSS samples. */
  rssMiB: number;
  /** The largest of them. */
  rssMaxMiB: number;
  p99Ms: number;
  /** Table name → total MiB (heap + indexes + TOAST). */
  tablesMiB: Record<string, number>;
  started: number;
}

const WIDTH = 720;
const PANEL_HEIGHT = 150;
const MARGIN = { left: 60, right: 150, top: 24, bottom: 26 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

interface Series {
  name: string;
  points: [number, number][];
}

function panel(
  title: string,
  unit: string,
  series: Series[],
  top: number,
  maxMinute: number,
  referenceMinute: number,
): string {
  const values = series.flatMap((s) => s.points.map((p) => p[1])).filter(Number.isFinite);
  const high = Math.max(1, ...values) * 1.1;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (m: number): number => MARGIN.left + (m / Math.max(1, maxMinute)) * plotW;
  const y = (v: number): number => top + MARGIN.top + plotH - (v / high) * plotH;
  const parts: string[] = [
    `<text x="${MARGIN.left}" y="${top + 16}" font-size="13" font-weight="bold">${title}</text>`,
    `<line x1="${MARGIN.left}" y1="${y(0)}" x2="${MARGIN.left + plotW}" y2="${y(0)}" stroke="#888"/>`,
    `<line x1="${MARGIN.left}" y1="${y(0)}" x2="${MARGIN.left}" y2="${y(high)}" stroke="#888"/>`,
    `<text x="${MARGIN.left - 6}" y="${y(high) + 10}" font-size="10" text-anchor="end">${high.toFixed(0)} ${unit}</text>`,
    `<text x="${MARGIN.left - 6}" y="${y(0)}" font-size="10" text-anchor="end">0</text>`,
    `<text x="${MARGIN.left + plotW}" y="${y(0) + 14}" font-size="10" text-anchor="end">minute ${maxMinute}</text>`,
  ];
  if (referenceMinute <= maxMinute)
    parts.push(
      `<line x1="${x(referenceMinute)}" y1="${y(0)}" x2="${x(referenceMinute)}" y2="${y(high)}" stroke="#bbb" stroke-dasharray="3,3"/>`,
    );
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const d = s.points
      .filter((p) => Number.isFinite(p[1]))
      .map((p, k) => `${k === 0 ? 'M' : 'L'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)
      .join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="1.5"/>`);
    parts.push(
      `<text x="${MARGIN.left + plotW + 8}" y="${top + MARGIN.top + 12 + i * 14}" font-size="11" fill="${colour}">${s.name}</text>`,
    );
  });
  return parts.join('\n');
}

export function soakSvg(samples: readonly SoakSample[], title: string, referenceMinute: number): string {
  const maxMinute = Math.max(1, ...samples.map((s) => s.minute));
  const tables = [...new Set(samples.flatMap((s) => Object.keys(s.tablesMiB)))];
  const panels = [
    panel(
      'node RSS',
      'MiB',
      [
        { name: 'median', points: samples.map((s) => [s.minute, s.rssMiB]) },
        { name: 'max', points: samples.map((s) => [s.minute, s.rssMaxMiB]) },
      ],
      30,
      maxMinute,
      referenceMinute,
    ),
    panel(
      'start − due time, p99 of each minute',
      'ms',
      [{ name: 'p99', points: samples.map((s) => [s.minute, s.p99Ms]) }],
      30 + PANEL_HEIGHT,
      maxMinute,
      referenceMinute,
    ),
    panel(
      'Postgres tables (heap + indexes)',
      'MiB',
      tables.map((t) => ({ name: t, points: samples.map((s) => [s.minute, s.tablesMiB[t] ?? Number.NaN]) })),
      30 + 2 * PANEL_HEIGHT,
      maxMinute,
      referenceMinute,
    ),
  ];
  const height = 30 + 3 * PANEL_HEIGHT + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${MARGIN.left}" y="18" font-size="14">${title}</text>`,
    ...panels,
    '</svg>',
    '',
  ].join('\n');
}
