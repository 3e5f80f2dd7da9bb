// The benchmarks' numeric flags: `--name N`, a positive integer, else a clear error naming the flag.
export function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? fallback : Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v <= 0)
    throw new Error(`--${name} must be a positive integer, got ${process.argv[i + 1]}`);
  return v;
}
