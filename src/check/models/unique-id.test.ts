import { describe, expect, it } from 'vitest';
import { checkHistory } from '../linearizability.js';
import type { Operation } from '../model.js';
import { formatCheckResult } from '../report.js';
import {
  checkUniqueIds,
  decodeIdRecord,
  formatUniqueIdResult,
  type IdInput,
  type IdOutput,
  increasingIdModel,
} from './unique-id.js';

type Op = Operation<IdInput, IdOutput>;
const issue = (id: bigint, t0: number, t1: number, clientId = 'c', key = ''): Op => ({
  clientId,
  key,
  input: { op: 'issue' },
  output: id,
  invokeTime: t0,
  returnTime: t1,
});

describe('checkUniqueIds', () => {
  it('accepts distinct IDs in any order in distinct mode', () => {
    const r = checkUniqueIds([issue(5n, 0, 1), issue(3n, 2, 3), issue(9n, 4, 5)]);
    expect(r.result).toBe('ok');
    expect(r.issued).toBe(3);
  });

  it('reports a duplicate with both holders', () => {
    const r = checkUniqueIds([issue(5n, 0, 1, 'a'), issue(7n, 1, 2, 'b'), issue(5n, 2, 3, 'c')]);
    expect(r.result).toBe('illegal');
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0]!.kind).toBe('duplicate');
    expect(r.violations[0]!.other.clientId).toBe('a');
    expect(r.violations[0]!.op.clientId).toBe('c');
    expect(formatUniqueIdResult(r)).toContain('ID 5 issued twice');
  });

  it('allows the same ID under different keys', () => {
    expect(checkUniqueIds([issue(1n, 0, 1, 'a', 'orders'), issue(1n, 0, 1, 'b', 'users')]).result).toBe('ok');
  });

  it('in increasing mode, rejects an ID below one returned before the call began', () => {
    const r = checkUniqueIds([issue(10n, 0, 1, 'a'), issue(4n, 2, 3, 'b')], { mode: 'increasing' });
    expect(r.result).toBe('illegal');
    expect(r.violations[0]!.kind).toBe('not-increasing');
    expect(r.violations[0]!.other.output).toBe(10n);
    // Distinct mode does not care about order.
    expect(checkUniqueIds([issue(10n, 0, 1), issue(4n, 2, 3)]).result).toBe('ok');
  });

  it('in increasing mode, lets overlapping calls return IDs in either order', () => {
    const h = [issue(10n, 0, 5, 'a'), issue(4n, 1, 6, 'b'), issue(11n, 7, 8, 'c')];
    expect(checkUniqueIds(h, { mode: 'increasing' }).result).toBe('ok');
    // Touching intervals count as overlapping.
    expect(checkUniqueIds([issue(10n, 0, 5), issue(4n, 5, 6)], { mode: 'increasing' }).result).toBe('ok');
  });

  it('ignores calls with an unknown outcome', () => {
    const lost = { ...issue(0n, 0, Number.POSITIVE_INFINITY), output: 0n };
    expect(checkUniqueIds([lost, issue(0n, 1, 2)]).result).toBe('ok');
  });

  it('counts every violation but keeps at most maxViolations', () => {
    const h = Array.from({ length: 10 }, (_, i) => issue(1n, i, i + 0.5));
    const r = checkUniqueIds(h, { maxViolations: 3 });
    expect(r.violationCount).toBe(9);
    expect(r.violations).toHaveLength(3);
  });

  it('rejects a bad mode', () => {
    expect(() => checkUniqueIds([], { mode: 'sorted' as never })).toThrow(
      /mode must be 'distinct' or 'increasing'/,
    );
  });
});

describe('increasingIdModel with checkHistory', () => {
  it('agrees on a simple violation and names the operation', () => {
    const res = checkHistory(increasingIdModel(), [issue(10n, 0, 1, 'a'), issue(4n, 2, 3, 'b')]);
    expect(res.result).toBe('illegal');
    expect(formatCheckResult(res)).toContain('issue() -> 4');
  });

  it('decodes records', () => {
    const base = { clientId: 'c', op: 'issue', invokeTime: 0 };
    expect(decodeIdRecord({ ...base, output: '18446744073709551615', returnTime: 1 }).output).toBe(
      2n ** 64n - 1n,
    );
    expect(() => decodeIdRecord({ ...base, op: 'get', returnTime: 1 })).toThrow(/id op must be "issue"/);
  });
});
