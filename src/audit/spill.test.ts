import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listSpillFiles, SpillStore } from './spill.js';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'floe-spill-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('SpillStore', () => {
  it('writes frames in order across rotations and reads them back', async () => {
    const dir = tmp();
    const s = new SpillStore({ dir, fileBytes: 100 });
    await s.open();
    for (let i = 0; i < 5; i++) expect(await s.append([`{"i":${i}}`])).toBe(true);
    expect(s.appendSync(['{"i":5}'])).toBe(true);
    await s.close();
    const files = listSpillFiles(dir);
    expect(files.length).toBeGreaterThan(1);
    const rows: string[] = [];
    for (const f of files) for (const fr of (await s.read(f)).frames) rows.push(fr.payload.toString().trim());
    expect(rows).toEqual([0, 1, 2, 3, 4, 5].map((i) => `{"i":${i}}`));
  });

  it('refuses appends beyond its bound and takes stock of files on reopen', async () => {
    const dir = tmp();
    const s = new SpillStore({ dir, maxBytes: 100 });
    await s.open();
    expect(s.appendSync(['x'.repeat(40)])).toBe(true); // 16 + 41 bytes
    expect(s.appendSync(['x'.repeat(40)])).toBe(false);
    expect(await s.append(['y'])).toBe(true); // 18 bytes still fit
    expect(s.totalBytes).toBe(57 + 18);
    await s.close();
    const again = new SpillStore({ dir, maxBytes: 100 });
    await again.open();
    expect(again.totalBytes).toBe(75);
    expect(again.pendingFiles()).toHaveLength(1);
    await again.remove(again.pendingFiles()[0]!);
    expect(again.totalBytes).toBe(0);
    expect(readdirSync(dir)).toEqual(['LOCK']);
    await again.close();
  });
});
