import { describe, expect, it } from 'vitest';
import { ConfigError, resolveServeConfig } from './config.js';

describe('floe serve --storage-lock', () => {
  it('kernel lock by default (refuse where unsupported); pid-file only when asked; anything else is an error', () => {
    expect(resolveServeConfig({}, {}).storageLock).toBeUndefined();
    expect(resolveServeConfig({ storageLock: 'kernel' } as never, {}).storageLock).toBeUndefined();
    expect(resolveServeConfig({ storageLock: 'pid-file' } as never, {}).storageLock).toBe('pid-file');
    expect(() => resolveServeConfig({ storageLock: 'none' } as never, {})).toThrow(ConfigError);
    expect(() => resolveServeConfig({ storageLock: 'none' } as never, {})).toThrow(
      'storageLock must be kernel or pid-file (got "none")',
    );
  });

  it('--take-legacy-lock: off by default, on only when asked (lock review F1)', () => {
    expect(resolveServeConfig({}, {}).takeLegacyLock).toBeUndefined();
    expect(resolveServeConfig({ takeLegacyLock: true } as never, {}).takeLegacyLock).toBe(true);
    expect(() => resolveServeConfig({ takeLegacyLock: 'yes' } as never, {})).toThrow(
      'takeLegacyLock must be true or false (got "yes")',
    );
  });
});
