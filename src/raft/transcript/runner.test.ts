// The transcript runner itself: the file format, rewriting, diffs, and clear errors for bad input.

import { describe, expect, it } from 'vitest';
import { parseTranscript, renderTranscript } from './datadriven.js';
import { rewriteRequested } from './files.js';
import { lineDiff, runTranscript } from './run.js';

const GOOD = `# comment kept as is

add-nodes 1 voters=(1)
----
stale output

# another comment
campaign 1
----
`;

describe('transcript file format', () => {
  it('parses comments, commands with positional, named and list arguments, and expected output', () => {
    const parts = parseTranscript(
      't.txt',
      'cut 1 2 one-way=true\n----\nok\n\nadd-nodes 2 voters=(1, 2) learners=()\n----\n',
    );
    const blocks = parts.flatMap((p) => (p.kind === 'block' ? [p.block] : []));
    expect(blocks.map((b) => [b.line, b.command, b.args, b.expected])).toEqual([
      [
        1,
        'cut',
        [
          { key: '1', values: undefined },
          { key: '2', values: undefined },
          { key: 'one-way', values: ['true'] },
        ],
        ['ok'],
      ],
      [
        5,
        'add-nodes',
        [
          { key: '2', values: undefined },
          { key: 'voters', values: ['1', '2'] },
          { key: 'learners', values: [] },
        ],
        [],
      ],
    ]);
  });

  it('renders a file back unchanged', () => {
    expect(renderTranscript(parseTranscript('t.txt', GOOD))).toBe(GOOD);
  });

  it('names the file and line of a command without a separator', () => {
    expect(() => parseTranscript('t.txt', 'campaign 1\nok\n')).toThrow(
      't.txt:2: expected "----" on the line after the command "campaign 1", got "ok"',
    );
    expect(() => parseTranscript('t.txt', '\n----\n')).toThrow('t.txt:2: "----" without a command');
    expect(() => parseTranscript('t.txt', 'add-nodes 1 voters=(1\n----\n')).toThrow(
      't.txt:1: unbalanced "("',
    );
  });
});

describe('running and rewriting', () => {
  it('reports a readable diff for output that changed, and rewrites only the outputs', () => {
    const r = runTranscript('t.txt', GOOD);
    expect(r.mismatches).toHaveLength(2);
    expect(r.mismatches[0]).toContain('t.txt:3: add-nodes 1 voters=(1)');
    expect(r.mismatches[0]).toContain(' - stale output');
    expect(r.mismatches[0]).toContain(
      ' + n1: follower term=0 vote=0 lead=0 commit=0 applied=0 last=0 voters=(1) learners=()',
    );
    // Comments and commands survive; the rewritten file passes.
    expect(r.rewritten).toContain('# comment kept as is\n');
    expect(r.rewritten).toContain('# another comment\ncampaign 1\n----\nok\n');
    expect(runTranscript('t.txt', r.rewritten).mismatches).toEqual([]);
  });

  it.each([
    ['frobnicate 1', 't.txt:1: frobnicate 1: unknown command "frobnicate" (known: add-nodes, applied,'],
    ['add-nodes x', 't.txt:1: add-nodes x: add-nodes: argument 1 must be an integer, got "x"'],
    ['campaign 1', 't.txt:1: campaign 1: no node 1 (nodes: none yet)'],
    ['add-nodes 1 voters=(1) colour=red', 'add-nodes does not take colour= (it takes voters=,'],
    ['add-nodes 1 pre-vote=maybe', 'add-nodes: pre-vote= must be true or false, got "maybe"'],
    ['tick', 'tick: name at least one node'],
  ])('a bad command fails with a clear error: %s', (cmd, message) => {
    expect(() => runTranscript('t.txt', `${cmd}\n----\n`)).toThrow(message);
  });

  it('refuses commands that make no sense for the node state', () => {
    const setup = 'add-nodes 1 voters=(1)\n----\n\n';
    expect(() => runTranscript('t.txt', `${setup}restart 1\n----\n`)).toThrow(
      'n1 is running; crash it first',
    );
    expect(() => runTranscript('t.txt', `${setup}crash 1\n----\n\npropose 1 x\n----\n`)).toThrow(
      'n1 is down',
    );
    expect(() => runTranscript('t.txt', `${setup}process-ready torn=1 1 2\n----\n`)).toThrow('no node 2');
    expect(() =>
      runTranscript('t.txt', 'add-nodes 2 voters=(1,2)\n----\n\nprocess-ready torn=1\n----\n'),
    ).toThrow('process-ready torn=K takes exactly one node');
  });
});

describe('lineDiff', () => {
  it('shows changes with a little context and the file line of each hunk', () => {
    const expected = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'];
    const actual = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'X', 'j'];
    expect(lineDiff(expected, actual, 10, 1)).toBe(
      ['  @@ line 17', '   h', ' - i', ' + X', '   j'].join('\n'),
    );
  });
});

describe('rewriteRequested', () => {
  it('reads FLOE_REWRITE', () => {
    expect(rewriteRequested({ FLOE_REWRITE: '1' })).toBe(true);
    expect(rewriteRequested({ FLOE_REWRITE: 'true' })).toBe(true);
    expect(rewriteRequested({ FLOE_REWRITE: '0' })).toBe(false);
    expect(rewriteRequested({})).toBe(false);
  });
});
