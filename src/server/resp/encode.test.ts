import { describe, expect, it } from 'vitest';
import { encodeReply } from './encode.js';
import { R, type Reply } from './reply.js';

const both = (r: Reply): [string, string] => [
  encodeReply(r, 2).toString('latin1'),
  encodeReply(r, 3).toString('latin1'),
];

describe('reply encoding, RESP2 vs RESP3', () => {
  it('scalars', () => {
    expect(both(R.OK)).toEqual(['+OK\r\n', '+OK\r\n']);
    expect(both(R.simple('PONG'))).toEqual(['+PONG\r\n', '+PONG\r\n']);
    expect(both(R.error('ERR bad\r\nthing'))).toEqual(['-ERR bad  thing\r\n', '-ERR bad  thing\r\n']);
    expect(both(R.int(-42))).toEqual([':-42\r\n', ':-42\r\n']);
    expect(both(R.int(2n ** 63n - 1n))).toEqual([':9223372036854775807\r\n', ':9223372036854775807\r\n']);
    expect(both(R.bulk('héllo'))).toEqual(['$6\r\nh\xc3\xa9llo\r\n', '$6\r\nh\xc3\xa9llo\r\n']);
    expect(both(R.bulk(Buffer.from([0, 13, 10])))).toEqual(['$3\r\n\0\r\n\r\n', '$3\r\n\0\r\n\r\n']);
    expect(both(R.NULL)).toEqual(['$-1\r\n', '_\r\n']);
    expect(both(R.NULL_ARRAY)).toEqual(['*-1\r\n', '_\r\n']);
    expect(both(R.bool(true))).toEqual([':1\r\n', '#t\r\n']);
    expect(both(R.double(1.5))).toEqual(['$3\r\n1.5\r\n', ',1.5\r\n']);
    expect(both(R.double(Number.NEGATIVE_INFINITY))).toEqual(['$4\r\n-inf\r\n', ',-inf\r\n']);
    expect(both(R.verbatim('a:1\r\n'))).toEqual(['$5\r\na:1\r\n\r\n', '=9\r\ntxt:a:1\r\n\r\n']);
  });

  it('aggregates', () => {
    expect(both(R.array([R.int(1), R.bulk('a')]))).toEqual([
      '*2\r\n:1\r\n$1\r\na\r\n',
      '*2\r\n:1\r\n$1\r\na\r\n',
    ]);
    expect(both(R.set([R.simple('x')]))).toEqual(['*1\r\n+x\r\n', '~1\r\n+x\r\n']);
    expect(both(R.push([R.bulk('message')]))).toEqual(['*1\r\n$7\r\nmessage\r\n', '>1\r\n$7\r\nmessage\r\n']);
    expect(both(R.map([[R.bulk('k'), R.int(1)]]))).toEqual([
      '*2\r\n$1\r\nk\r\n:1\r\n',
      '%1\r\n$1\r\nk\r\n:1\r\n',
    ]);
    expect(both(R.multi([R.OK, R.OK]))).toEqual(['+OK\r\n+OK\r\n', '+OK\r\n+OK\r\n']);
  });

  it('records: numbers are bulk strings in RESP2 (like HGETALL) and integers in RESP3', () => {
    const r = R.record([
      ['worker_id', 7],
      ['node_id', 'host-a'],
      ['skipped', undefined],
      ['token', 12345678901234567890n],
    ]);
    expect(encodeReply(r, 2).toString()).toBe(
      '*6\r\n$9\r\nworker_id\r\n$1\r\n7\r\n$7\r\nnode_id\r\n$6\r\nhost-a\r\n$5\r\ntoken\r\n$20\r\n12345678901234567890\r\n',
    );
    expect(encodeReply(r, 3).toString()).toBe(
      '%3\r\n$9\r\nworker_id\r\n:7\r\n$7\r\nnode_id\r\n$6\r\nhost-a\r\n$5\r\ntoken\r\n:12345678901234567890\r\n',
    );
  });

  it('grows past its initial buffer and hands over large batches intact', () => {
    const big = 'x'.repeat(100_000);
    const out = encodeReply(R.array([R.bulk(big), R.bulk(big)]), 2);
    const one = `$100000\r\n${big}\r\n`;
    expect(out.toString('latin1')).toBe(`*2\r\n${one}${one}`);
  });
});
