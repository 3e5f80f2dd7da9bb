import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HistoryFormatError, parseHistoryText, readHistoryFiles, toOperations } from './history-file.js';
import { decodeRegisterRecord } from './models/register.js';

const lines = (...xs: object[]) => xs.map((x) => JSON.stringify(x)).join('\n') + '\n';
const op = { clientId: 'c1', op: 'write', key: 'k', input: 1, output: null, invokeTime: 10, returnTime: 20 };

describe('parseHistoryText', () => {
  it('parses complete operations; null returnTime is an unknown outcome', () => {
    const { records } = parseHistoryText(lines(op, { ...op, invokeTime: 30, returnTime: null }), 'f');
    expect(records).toHaveLength(2);
    expect(records[0]).toMatchObject({
      clientId: 'c1',
      op: 'write',
      key: 'k',
      input: 1,
      returnTime: 20,
      source: 'f:1',
    });
    expect(records[1]!.returnTime).toBeNull();
  });

  it('pairs invoke lines with their completion, and keeps orphans as unknown outcomes', () => {
    const text = lines(
      { type: 'invoke', clientId: 'c1', seq: 0, op: 'write', key: 'k', input: 1, invokeTime: 10 },
      { type: 'invoke', clientId: 'c1', seq: 1, op: 'write', key: 'k', input: 2, invokeTime: 11 },
      { type: 'invoke', clientId: 'c1', seq: 2, op: 'write', key: 'k', input: 3, invokeTime: 12 },
      { ...op, seq: 0 },
      { type: 'failed', clientId: 'c1', seq: 2 },
    );
    const { records } = parseHistoryText(text);
    expect(records.map((r) => [r.input, r.returnTime])).toEqual([
      [1, 20],
      [2, null], // the writer died before seq 1 completed
    ]);
  });

  it('ignores a torn last line but rejects garbage in the middle, naming the line', () => {
    const torn = lines(op) + '{"clientId":"c1","op":"wr';
    const parsed = parseHistoryText(torn, 'a.jsonl');
    expect(parsed.records).toHaveLength(1);
    expect(parsed.tornTail).toBe(true);
    expect(() => parseHistoryText(`${lines(op)}{oops\n${lines(op)}`, 'a.jsonl')).toThrow(
      /a\.jsonl:2: not valid JSON/,
    );
  });

  it('names what is wrong with a record', () => {
    const bad = (x: object) => () => parseHistoryText(lines(x), 'h');
    expect(bad({ ...op, returnTime: undefined })).toThrow(/h:1: returnTime is missing \(use null/);
    expect(bad({ ...op, returnTime: 5 })).toThrow(/returnTime must be null or a number >= invokeTime \(10\)/);
    expect(bad({ ...op, clientId: undefined })).toThrow(/clientId must be a string or number/);
    expect(bad({ ...op, invokeTime: 'x' })).toThrow(/invokeTime must be a finite number/);
    expect(bad({ ...op, type: 'weird' })).toThrow(/type must be "op", "invoke" or "failed"/);
    expect(bad({ ...op, type: 'invoke' })).toThrow(/an "invoke" line needs a seq/);
    expect(bad([1, 2])).toThrow(HistoryFormatError);
  });
});

describe('files and decoding', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('merges files from several processes in invoke order', async () => {
    dir = mkdtempSync(join(tmpdir(), 'floe-hist-'));
    writeFileSync(join(dir, 'a.jsonl'), lines({ ...op, invokeTime: 30, returnTime: 40 }));
    writeFileSync(join(dir, 'b.jsonl'), lines({ ...op, clientId: 'c2', invokeTime: 10, returnTime: 50 }));
    const { records } = await readHistoryFiles([join(dir, 'a.jsonl'), join(dir, 'b.jsonl')]);
    expect(records.map((r) => r.clientId)).toEqual(['c2', 'c1']);
  });

  it('turns records into operations and names the source of a bad one', () => {
    const { records } = parseHistoryText(
      lines(op, { ...op, returnTime: null }, { ...op, op: 'cas', input: 1 }),
      'h',
    );
    expect(() => toOperations(records, decodeRegisterRecord)).toThrow(/h:3: cas input must be/);
    const ops = toOperations(records.slice(0, 2), decodeRegisterRecord);
    expect(ops[0]).toMatchObject({ key: 'k', input: { op: 'write', value: 1 }, returnTime: 20 });
    expect(ops[1]!.returnTime).toBe(Number.POSITIVE_INFINITY);
  });
});
