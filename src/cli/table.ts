/** Columns padded to their widest cell; an empty list says so. */
export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return '(none)\n';
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}
