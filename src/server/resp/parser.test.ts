import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitInlineArgs } from './inline.js';
import { DEFAULT_LIMITS } from './limits.js';
import { type ParsedCommand, ProtocolError, parseStrictInt, RequestParser } from './parser.js';
import { encodeCommand } from './test-support.js';

const limits = {
  maxBulkBytes: DEFAULT_LIMITS.maxBulkBytes,
  maxArgs: DEFAULT_LIMITS.maxArgs,
  maxRequestBytes: DEFAULT_LIMITS.maxRequestBytes,
  maxInlineBytes: DEFAULT_LIMITS.maxInlineBytes,
};

/** Feed `input` (in the given chunks) and collect everything the parser yields until it needs more. */
function parseAll(chunks: (string | Buffer)[], l = limits): (string[] | string)[] {
  const p = new RequestParser(l);
  const out: (string[] | string)[] = [];
  for (const c of chunks) {
    p.push(typeof c === 'string' ? Buffer.from(c, 'latin1') : c);
    for (;;) {
      const r = p.next();
      if (r === undefined) break;
      if (r instanceof ProtocolError) {
        out.push(r.message);
        return out;
      }
      out.push(r.args.map((a) => a.toString('latin1')));
    }
  }
  return out;
}

function firstError(input: string, l = limits): string | undefined {
  const r = parseAll([input], l);
  const last = r[r.length - 1];
  return typeof last === 'string' ? last : undefined;
}

describe('RequestParser: RESP multibulk', () => {
  it('parses pipelined commands and waits for incomplete ones', () => {
    const p = new RequestParser(limits);
    p.push(Buffer.from('*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhel'));
    expect((p.next() as ParsedCommand).args.map(String)).toEqual(['PING']);
    expect(p.next()).toBeUndefined();
    expect(p.midRequest).toBe(true);
    p.push(Buffer.from('lo\r\n'));
    expect((p.next() as ParsedCommand).args.map(String)).toEqual(['ECHO', 'hello']);
    expect(p.next()).toBeUndefined();
    expect(p.bufferedBytes).toBe(0);
  });

  it('is binary safe (CR, LF and NUL inside bulk strings)', () => {
    const arg = Buffer.from([0, 13, 10, 36, 42, 255]);
    const p = new RequestParser(limits);
    p.push(encodeCommand('ECHO', arg));
    expect((p.next() as ParsedCommand).args[1]).toEqual(arg);
  });

  it('skips *0 and *-1 (empty requests), as Redis does', () => {
    expect(parseAll(['*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n'])).toEqual([['PING']]);
  });

  it('property: any split of any pipeline yields the same commands in order', () => {
    const arg = fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a));
    const command = fc.array(arg, { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(
        fc.array(command, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (cmds, cuts) => {
          const wire = Buffer.concat(cmds.map((c) => encodeCommand(...c)));
          const points = [...new Set(cuts.map((c) => c % (wire.length + 1)))].sort((a, b) => a - b);
          const chunks: Buffer[] = [];
          let prev = 0;
          for (const pt of [...points, wire.length]) {
            chunks.push(wire.subarray(prev, pt));
            prev = pt;
          }
          const p = new RequestParser(limits);
          const got: Buffer[][] = [];
          for (const ch of chunks) {
            p.push(ch);
            for (let r = p.next(); r !== undefined; r = p.next()) {
              if (r instanceof ProtocolError) throw new Error(r.message);
              got.push(r.args);
            }
          }
          expect(got).toEqual(cmds);
          expect(p.bufferedBytes).toBe(0);
        },
      ),
    );
  });

  it('byte-at-a-time input of a large argument parses correctly', () => {
    const big = Buffer.alloc(64 * 1024, 0x61);
    const wire = encodeCommand('ECHO', big);
    const p = new RequestParser(limits);
    let got: ParsedCommand | undefined;
    for (let i = 0; i < wire.length; i++) {
      p.push(wire.subarray(i, i + 1));
      const r = p.next();
      if (r instanceof ProtocolError) throw new Error(r.message);
      if (r) got = r;
    }
    expect(got?.args[1]?.equals(big)).toBe(true);
  });

  it('arguments handed out stay intact while more input arrives', () => {
    const p = new RequestParser(limits);
    p.push(Buffer.from('*1\r\n$3\r\nabc\r\n*1\r\n$3\r\nd'));
    const first = p.next() as ParsedCommand;
    p.push(Buffer.from('ef\r\n'));
    p.push(Buffer.from('*1\r\n$3\r\nxyz\r\n'));
    expect((p.next() as ParsedCommand).args.map(String)).toEqual(['def']);
    expect((p.next() as ParsedCommand).args.map(String)).toEqual(['xyz']);
    expect(first.args.map(String)).toEqual(['abc']);
  });
});

describe('RequestParser: errors (Redis wording) and limits', () => {
  it.each(
    [
      ['*x\r\n', 'Protocol error: invalid multibulk length'],
      ['*01\r\n', 'Protocol error: invalid multibulk length'],
      ['*-5\r\n', 'Protocol error: invalid multibulk length'],
      ['*1025\r\n', 'Protocol error: invalid multibulk length'],
      ['*99999999999999999999999\r\n', 'Protocol error: invalid multibulk length'],
      ['*1\r\n$-1\r\n', 'Protocol error: invalid bulk length'],
      ['*1\r\n$x\r\n', 'Protocol error: invalid bulk length'],
      ['*1\r\n$524289\r\n', 'Protocol error: invalid bulk length'],
      ['*1\r\n$99999999999999999999\r\n', 'Protocol error: invalid bulk length'],
      ['*1\r\n#', "Protocol error: expected '$', got '#'"],
      ['*1\r\n$4\r\nPINGxx', 'Protocol error: expected CRLF after bulk string data'],
      [`*${'1'.repeat(70)}`, 'Protocol error: too big mbulk count string'],
      [`*1\r\n$${'1'.repeat(70)}`, 'Protocol error: too big bulk count string'],
      ['*1\rX', 'Protocol error: expected CRLF after mbulk count'],
      ['PING "unterminated\r\n', 'Protocol error: unbalanced quotes in request'],
      ['PING "a"b\r\n', 'Protocol error: unbalanced quotes in request'],
      [`${'A'.repeat(70_000)}`, 'Protocol error: too big inline request'],
      [`${'A'.repeat(70_000)}\r\n`, 'Protocol error: too big inline request'],
    ].map(([input, message]) => [JSON.stringify(input).slice(0, 40), input, message]),
  )('%s → %s', (_label, input, message) => {
    expect(firstError(input!)).toBe(message);
  });

  it('refuses a request bigger than maxRequestBytes as soon as a bulk header says so', () => {
    const l = { ...limits, maxRequestBytes: 1000, maxBulkBytes: 600 };
    expect(firstError('*3\r\n$3\r\nSET\r\n$500\r\n' + 'a'.repeat(500) + '\r\n$500\r\n', l)).toBe(
      'Protocol error: too big request (more than 1000 bytes in one command)',
    );
  });

  it('refuses too many inline arguments', () => {
    expect(firstError('a b c d\r\n', { ...limits, maxArgs: 3 })).toBe(
      'Protocol error: too many arguments in inline request (4; at most 3)',
    );
  });

  it('applies the pre-authentication limits with Redis wording', () => {
    const p = new RequestParser(limits);
    p.preAuth = { maxArgs: 10, maxBulkBytes: 16384 };
    p.push(Buffer.from('*11\r\n'));
    expect((p.next() as ProtocolError).message).toBe('Protocol error: unauthenticated multibulk length');
    const q = new RequestParser(limits);
    q.preAuth = { maxArgs: 10, maxBulkBytes: 16384 };
    q.push(Buffer.from('*1\r\n$16385\r\n'));
    expect((q.next() as ProtocolError).message).toBe('Protocol error: unauthenticated bulk length');
  });

  it('stays failed after an error and ignores further input', () => {
    const p = new RequestParser(limits);
    p.push(Buffer.from('*x\r\n'));
    const e = p.next();
    expect(e).toBeInstanceOf(ProtocolError);
    p.push(Buffer.from('*1\r\n$4\r\nPING\r\n'));
    expect(p.next()).toBe(e);
    expect(p.bufferedBytes).toBe(0);
  });

  it('commands before a protocol error in the same read are still returned first', () => {
    expect(parseAll(['*1\r\n$4\r\nPING\r\nPING\r\n*x\r\n'])).toEqual([
      ['PING'],
      ['PING'],
      'Protocol error: invalid multibulk length',
    ]);
  });

  it('parseStrictInt follows string2ll', () => {
    const p = (s: string) => parseStrictInt(Buffer.from(s), 0, s.length);
    expect(p('0')).toBe(0);
    expect(p('-12')).toBe(-12);
    expect(p('123')).toBe(123);
    for (const bad of ['', '-', '-0', '01', '+1', ' 1', '1 ', '1.0', '0x10']) expect(p(bad)).toBeUndefined();
  });
});

describe('inline commands (redis-cli / telnet style)', () => {
  it('splits on blanks, strips CRLF or LF, skips empty lines', () => {
    expect(parseAll(['PING\r\n\r\n  \r\nECHO  a\tb\nSET k v\r\n'])).toEqual([
      ['PING'],
      ['ECHO', 'a', 'b'],
      ['SET', 'k', 'v'],
    ]);
  });

  it('understands quotes and escapes as sdssplitargs does', () => {
    const split = (s: string) => splitInlineArgs(Buffer.from(s, 'latin1'))?.map((b) => b.toString('latin1'));
    expect(split('ECHO "a\\x41\\n\\t\\"q\\""')).toEqual(['ECHO', 'aA\n\t"q"']);
    expect(split("ECHO 'it\\'s' 'a\\nb'")).toEqual(['ECHO', "it's", 'a\\nb']);
    expect(split('ECHO a"b c"')).toEqual(['ECHO', 'ab c']);
    expect(split('ECHO ""')).toEqual(['ECHO', '']);
    expect(split('ECHO "\\xZZ"')).toEqual(['ECHO', 'xZZ']);
    expect(split('a\0b c')).toEqual(['a']);
    expect(split('"a"b')).toBeUndefined();
    expect(split("'a")).toBeUndefined();
    expect(split('   ')).toEqual([]);
  });

  it('property: quoting any bytes with \\xHH round-trips', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 20 }), { minLength: 1, maxLength: 6 }), (args) => {
        const line = args
          .map((a) => `"${[...a].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('')}"`)
          .join(' ');
        const got = splitInlineArgs(Buffer.from(line, 'latin1'));
        expect(got).toEqual(args.map((a) => Buffer.from(a)));
      }),
    );
  });
});
