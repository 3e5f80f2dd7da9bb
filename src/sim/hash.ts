// Non-cryptographic 64-bit digests (two independent 32-bit lanes) for trace fingerprints,
// entry payloads and the state machine's chain hash. Deterministic across platforms; collisions
// are astronomically unlikely at the sizes a simulation produces.

export class Digest {
  private a = 0x811c9dc5;
  private b = 0x9747b28c;

  updateString(s: string): this {
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    this.a = a >>> 0;
    this.b = b >>> 0;
    return this;
  }

  updateBytes(bytes: Uint8Array): this {
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < bytes.length; i++) {
      const c = bytes[i] as number;
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    // Length is folded in so that a trailing zero byte changes the digest.
    this.a = Math.imul(a ^ bytes.length, 0x01000193) >>> 0;
    this.b = b >>> 0;
    return this;
  }

  hex(): string {
    return this.a.toString(16).padStart(8, '0') + this.b.toString(16).padStart(8, '0');
  }
}

export function digestString(s: string): string {
  return new Digest().updateString(s).hex();
}

export function digestBytes(bytes: Uint8Array): string {
  return new Digest().updateBytes(bytes).hex();
}
