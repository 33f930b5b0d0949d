import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';

/**
 * What the nodes say about the tasks a nemesis run left unfinished, read before the cluster is
 * torn down (and with it every actor's state): each limit key those tasks name as its actor
 * shows itself on each node (`GET /admin/actors/limit/<key>`), and a few of the tasks'
 * `explain`. Written to `stuck.json` in the run directory: a run that loses tasks must say why
 * without a second run.
 */
export async function writeStuckReport(
  dir: string,
  nodeUrls: readonly string[],
  left: readonly Record<string, unknown>[],
): Promise<void> {
  const read = async (url: string): Promise<unknown> => {
    try {
      const res = await request(url, { headersTimeout: 5_000, bodyTimeout: 5_000 });
      const text = await res.body.text();
      try {
        return { status: res.statusCode, body: JSON.parse(text) as unknown };
      } catch {
        return { status: res.statusCode, body: text.slice(0, 2_000) };
      }
    } catch (error) {
      return { error: String(error) };
    }
  };
  const keys = new Set<string>();
  for (const task of left) {
    if (Array.isArray(task.limits)) for (const key of task.limits) keys.add(String(key));
    if (typeof task.task_type === 'string') keys.add(`type:${task.task_type}`);
  }
  const limits: Record<string, Record<string, unknown>> = {};
  for (const key of [...keys].slice(0, 10)) {
    const byNode: Record<string, unknown> = {};
    for (const url of nodeUrls) byNode[url] = await read(`${url}/admin/actors/limit/${encodeURIComponent(key)}`);
    limits[key] = byNode;
  }
  const explain: Record<string, unknown> = {};
  for (const task of left.slice(0, 5)) {
    const id = String(task.id);
    explain[id] = await read(`${nodeUrls[0]}/api/tasks/${id}/explain`);
  }
  writeFileSync(join(dir, 'stuck.json'), JSON.stringify({ limits, explain }, null, 1));
}
