/**
 * The grants of a claim grouped by the set of (key, epoch) pairs each task holds
 * (src/store/sql/claim-fence.ts): what the fenced claim reads, one small number per task.
 */
import { describe, expect, it } from 'vitest';
import { fenceGroups } from '../../src/store/sql/claim-fence.js';

const ids = ['a', 'b', 'c', 'd'];

describe('fenceGroups', () => {
  it('makes one group of one pair for a claim whose tasks all hold one key', () => {
    const grants = ids.map((taskId) => ({ taskId, key: 'w1', epoch: 7 }));
    expect(fenceGroups(grants, ids)).toEqual({
      keys: ['w1'],
      epochs: [7],
      groupOf: [1],
      idGroups: [1, 1, 1, 1],
    });
  });

  it('gives each set of pairs its group, whatever order the grants came in', () => {
    const grants = [
      { taskId: 'a', key: 'x', epoch: 1 },
      { taskId: 'b', key: 'y', epoch: 1 },
      { taskId: 'b', key: 'x', epoch: 1 },
      { taskId: 'c', key: 'x', epoch: 1 },
      { taskId: 'c', key: 'y', epoch: 1 },
      { taskId: 'c', key: 'x', epoch: 1 }, // the same grant twice: the same set
    ];
    const fence = fenceGroups(grants, ids);
    // d holds none: group 0, which no pair names.
    expect(fence.idGroups).toEqual([1, 2, 2, 0]);
    const pairsOf = (group: number): string[] =>
      fence.groupOf.flatMap((g, i) => (g === group ? [`${fence.keys[i]}@${fence.epochs[i]}`] : [])).sort();
    expect(pairsOf(1)).toEqual(['x@1']);
    expect(pairsOf(2)).toEqual(['x@1', 'y@1']);
  });

  it('tells two epochs of one key apart', () => {
    const grants = [
      { taskId: 'a', key: 'x', epoch: 1 },
      { taskId: 'b', key: 'x', epoch: 2 },
    ];
    const fence = fenceGroups(grants, ids);
    expect(fence.idGroups).toEqual([1, 2, 0, 0]);
    expect(fence.epochs).toEqual([1, 2]);
  });

  it('drops the grants of ids the claim does not carry, and finds an id written in capitals', () => {
    const grants = [
      { taskId: 'zz', key: 'x', epoch: 1 },
      { taskId: 'B', key: 'x', epoch: 1 },
    ];
    expect(fenceGroups(grants, ids)).toEqual({
      keys: ['x'],
      epochs: [1],
      groupOf: [1],
      idGroups: [0, 1, 0, 0],
    });
  });
});
