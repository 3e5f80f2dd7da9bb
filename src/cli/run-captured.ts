import { runCli } from './program.js';

/** Runs the CLI in-process with `argv` and `env`, capturing what it prints: for tests and embedding. */
export async function runCaptured(
  argv: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    out: (s) => {
      stdout += s;
    },
    err: (s) => {
      stderr += s;
    },
    env,
  });
  return { code, stdout, stderr };
}
