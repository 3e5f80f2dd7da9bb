/**
 * Redis's glob matching (`stringmatchlen`), used by PSUBSCRIBE and CONFIG GET:
 * `*` any run, `?` one character, `[abc]` / `[^abc]` / `[a-z]` classes, `\x` a literal x.
 * Iterative with backtracking to the last `*`, so a pattern cannot make matching exponential.
 */
export function globMatch(pattern: string, subject: string, nocase = false): boolean {
  const p = nocase ? pattern.toLowerCase() : pattern;
  const s = nocase ? subject.toLowerCase() : subject;
  let pi = 0;
  let si = 0;
  let starP = -1;
  let starS = 0;
  while (si < s.length) {
    if (pi < p.length) {
      const c = p[pi]!;
      if (c === '*') {
        while (pi < p.length && p[pi] === '*') pi++;
        if (pi === p.length) return true;
        starP = pi;
        starS = si;
        continue;
      }
      const m = matchOne(p, pi, s[si]!);
      if (m > 0) {
        pi = m;
        si++;
        continue;
      }
    }
    if (starP === -1) return false;
    pi = starP;
    si = ++starS;
  }
  while (pi < p.length && p[pi] === '*') pi++;
  return pi === p.length;
}

/** Match one subject character against the pattern element at `pi`; returns the next pattern index, or 0. */
function matchOne(p: string, pi: number, ch: string): number {
  const c = p[pi]!;
  if (c === '?') return pi + 1;
  if (c === '\\' && pi + 1 < p.length) return p[pi + 1] === ch ? pi + 2 : 0;
  if (c !== '[') return c === ch ? pi + 1 : 0;
  let i = pi + 1;
  const negate = p[i] === '^';
  if (negate) i++;
  let matched = false;
  while (i < p.length && p[i] !== ']') {
    if (p[i] === '\\' && i + 1 < p.length) {
      if (p[i + 1] === ch) matched = true;
      i += 2;
    } else if (i + 2 < p.length && p[i + 1] === '-' && p[i + 2] !== ']') {
      let lo = p[i]!;
      let hi = p[i + 2]!;
      if (lo > hi) [lo, hi] = [hi, lo];
      if (ch >= lo && ch <= hi) matched = true;
      i += 3;
    } else {
      if (p[i] === ch) matched = true;
      i++;
    }
  }
  // An unterminated class: Redis treats the end of the pattern as closing it.
  const next = i < p.length ? i + 1 : i;
  return matched !== negate ? next : 0;
}
