// The transcript file format (in the spirit of etcd-io/raft's datadriven testdata):
//
//   # a comment, kept as is
//   command arg key=value key=(a,b)
//   ----
//   expected output, one or more lines
//   (a blank line ends the block)
//
// Output lines are never blank (a command that prints nothing prints "ok"), so a blank line always
// ends a block. Everything that is not a block — comments, blank lines — is kept verbatim when a
// file is rewritten, so a rewrite only ever changes expected output.

export interface Arg {
  /** The key of `key=value`, or the whole text of a positional argument. */
  key: string;
  /** Undefined for a positional argument. A list `k=(a,b)` has several values, `k=()` none. */
  values: string[] | undefined;
}

export interface Block {
  /** 1-based line number of the command, for error messages. */
  line: number;
  command: string;
  args: Arg[];
  /** The command line exactly as written. */
  source: string;
  expected: string[];
}

/** A file is a sequence of verbatim text (comments, blank lines) and blocks, in order. */
export type Part = { kind: 'text'; lines: string[] } | { kind: 'block'; block: Block };

export class TranscriptSyntaxError extends Error {
  constructor(file: string, line: number, what: string) {
    super(`${file}:${line}: ${what}`);
    this.name = 'TranscriptSyntaxError';
  }
}

export const SEPARATOR = '----';

export function parseTranscript(file: string, content: string): Part[] {
  const lines = content.split('\n');
  // A trailing newline does not make an extra empty line.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const parts: Part[] = [];
  let verbatim: string[] = [];
  const flush = (): void => {
    if (verbatim.length > 0) parts.push({ kind: 'text', lines: verbatim });
    verbatim = [];
  };
  let i = 0;
  while (i < lines.length) {
    const raw = lines[i] as string;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) {
      verbatim.push(raw);
      i++;
      continue;
    }
    const lineNo = i + 1;
    if (trimmed === SEPARATOR)
      throw new TranscriptSyntaxError(file, lineNo, `"${SEPARATOR}" without a command`);
    const next = lines[i + 1];
    if (next === undefined || next.trim() !== SEPARATOR) {
      throw new TranscriptSyntaxError(
        file,
        lineNo + 1,
        `expected "${SEPARATOR}" on the line after the command "${trimmed}"${
          next === undefined ? ' (end of file)' : `, got "${next}"`
        }`,
      );
    }
    const { command, args } = parseCommandLine(file, lineNo, trimmed);
    i += 2;
    const expected: string[] = [];
    while (i < lines.length && (lines[i] as string).trim() !== '') {
      expected.push(lines[i] as string);
      i++;
    }
    flush();
    parts.push({ kind: 'block', block: { line: lineNo, command, args, source: raw, expected } });
  }
  flush();
  return parts;
}

const TOKEN = /^([A-Za-z0-9_.:"'-]+)(?:=(\([^)]*\)|[^\s()]*))?$/;

function parseCommandLine(file: string, line: number, text: string): { command: string; args: Arg[] } {
  // Split on spaces, but keep a parenthesised list (which may contain spaces after commas) together.
  const tokens: string[] = [];
  let cur = '';
  let depth = 0;
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (depth < 0) throw new TranscriptSyntaxError(file, line, `unbalanced ")" in "${text}"`);
    if (/\s/.test(ch) && depth === 0) {
      if (cur !== '') tokens.push(cur);
      cur = '';
    } else {
      cur += ch;
    }
  }
  if (depth !== 0) throw new TranscriptSyntaxError(file, line, `unbalanced "(" in "${text}"`);
  if (cur !== '') tokens.push(cur);
  const [command, ...rest] = tokens as [string, ...string[]];
  const args: Arg[] = [];
  for (const tok of rest) {
    const m = TOKEN.exec(tok);
    if (m === null) throw new TranscriptSyntaxError(file, line, `cannot read the argument "${tok}"`);
    const key = m[1] as string;
    const value = m[2];
    if (value === undefined) {
      args.push({ key, values: undefined });
    } else if (value.startsWith('(')) {
      const inner = value.slice(1, -1).trim();
      args.push({ key, values: inner === '' ? [] : inner.split(',').map((v) => v.trim()) });
    } else {
      args.push({ key, values: [value] });
    }
  }
  return { command, args };
}

/** Writes parts back out, with each block's expected output replaced by `outputs[i]` when given. */
export function renderTranscript(parts: readonly Part[], outputs?: readonly string[][]): string {
  const out: string[] = [];
  let b = 0;
  for (const p of parts) {
    if (p.kind === 'text') {
      out.push(...p.lines);
      continue;
    }
    out.push(p.block.source, SEPARATOR, ...(outputs?.[b] ?? p.block.expected));
    b++;
  }
  return `${out.join('\n')}\n`;
}
