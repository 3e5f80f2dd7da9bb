/** Where commands write. Tests capture it; `main.ts` binds it to process.stdout / process.stderr. */
export interface CliIO {
  /** Write to stdout (the caller adds newlines). */
  out(text: string): void;
  /** Write to stderr. */
  err(text: string): void;
  /** Environment variables (for defaults such as secrets). */
  env: Readonly<Record<string, string | undefined>>;
}

/** Bad input from the user: printed as `floe: error: <message>` and exit code 2, never a stack trace. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A command could not do its job for a reason the user must see (not a bug): `floe: error: ...`, exit 1. */
export class CommandFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandFailedError';
  }
}

/** Exit codes: 0 ok, 1 unexpected failure, 2 bad input. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Parse a decimal integer option in [min, max], or throw a UsageError naming the option and the range. */
export function parseIntOption(name: string, text: string, min: number, max: number): number {
  const trimmed = text.trim();
  const value = /^-?[0-9]+$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(text)}`);
  }
  return value;
}
