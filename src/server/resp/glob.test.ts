import { describe, expect, it } from 'vitest';
import { globMatch } from './glob.js';

describe('globMatch (Redis stringmatch rules)', () => {
  it.each([
    ['*', 'anything', true],
    ['+switch-master', '+switch-master', true],
    ['switch-master', '+switch-master', false],
    ['*switch*', '+switch-master', true],
    ['[-+]sdown', '+sdown', true],
    ['[-+]sdown', '-sdown', true],
    ['[-+]sdown', 'xsdown', false],
    ['[^a]b', 'cb', true],
    ['[^a]b', 'ab', false],
    ['[a-c]x', 'bx', true],
    ['[c-a]x', 'bx', true],
    ['h?llo', 'hello', true],
    ['h\\*llo', 'h*llo', true],
    ['h\\*llo', 'hello', false],
    ['a*b*c', 'aXXbYYc', true],
    ['a*b*c', 'aXXbYY', false],
    ['cluster-announce-*', 'maxclients', false],
  ])('%s vs %s → %s', (pattern, subject, expected) => {
    expect(globMatch(pattern, subject)).toBe(expected);
  });

  it('nocase', () => {
    expect(globMatch('MAX*', 'maxclients', true)).toBe(true);
    expect(globMatch('MAX*', 'maxclients')).toBe(false);
  });

  it('stays linear on patterns that make naive matchers exponential', () => {
    const subject = 'a'.repeat(5000);
    expect(globMatch(`${'*a'.repeat(50)}b`, subject)).toBe(false);
  });
});
