import { describe, expect, it } from 'vitest';
import { pack } from '../../node/envelope.js';
import { readFrame } from '../../storage/record.js';
import { frameShapedText } from './frame-shaped.js';

describe('frame-shaped values', () => {
  it('are a valid WAL frame of ASCII bytes that msgpack keeps verbatim', () => {
    const text = frameShapedText();
    const bytes = Buffer.from(text, 'latin1');
    expect(bytes.every((b) => b < 0x80)).toBe(true);
    expect(readFrame(bytes, 0)).toMatchObject({ kind: 'ok', next: bytes.length });
    // A value as the workload writes it, inside a command as the node packs it: the frame is found in the bytes.
    const value = `kv1-7:${text}`;
    const JSONround = JSON.parse(JSON.stringify({ value })).value as string;
    const packed = Buffer.from(pack({ op: 'put', key: 'k0', value: JSONround }));
    const at = packed.indexOf(bytes);
    expect(at).toBeGreaterThan(0);
    expect(readFrame(packed, at).kind).toBe('ok');
  });
});
