import type { DbTx } from '../../src/store/db.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Alias?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/**
 * How a statement's plan reads `table`, one entry per scan, by alias: `t: Index Scan tasks_pkey`,
 * `t: Seq Scan`, `t: Bitmap Index Scan tasks_ended_idx` (a bitmap heap scan is named by the
 * indexes below it). The table a statement writes (ModifyTable) is not a read.
 */
export async function tableReads(db: DbTx, table: string, text: string, params: unknown[]): Promise<string[]> {
  const { rows } = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
  const found: string[] = [];
  const indexesBelow = (node: PlanNode): string[] => [
    ...(node['Node Type'] === 'Bitmap Index Scan' ? [node['Index Name'] as string] : []),
    ...(node.Plans ?? []).flatMap(indexesBelow),
  ];
  const walk = (node: PlanNode): void => {
    if (node['Relation Name'] === table && node['Node Type'] !== 'ModifyTable') {
      if (node['Node Type'] === 'Bitmap Heap Scan')
        for (const index of indexesBelow(node)) found.push(`${node.Alias}: Bitmap Index Scan ${index}`);
      else found.push(`${node.Alias}: ${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  const plan = rows[0]?.['QUERY PLAN'];
  const parsed = (typeof plan === 'string' ? JSON.parse(plan) : plan) as { Plan: PlanNode }[];
  walk(parsed[0]!.Plan);
  return found;
}
