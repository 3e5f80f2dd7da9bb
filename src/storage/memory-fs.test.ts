import { describe, expect, it } from 'vitest';
import type { StorageFs } from './file-system.js';
import { errCode, writeAll } from './fs-util.js';
import { MemoryFs } from './memory-fs.js';

async function put(fs: StorageFs, file: string, text: string, sync: boolean): Promise<void> {
  const fh = await fs.open(file, 'w');
  await writeAll(fh, [Buffer.from(text)], 0);
  if (sync) await fh.datasync();
  await fh.close();
}

async function read(fs: StorageFs, file: string): Promise<string | undefined> {
  try {
    return (await fs.readFile(file)).toString();
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** A deterministic random(n) from a fixed list of draws. */
function draws(...values: number[]): (n: number) => number {
  let i = 0;
  return (n) => Math.min(values[i++] ?? 0, n - 1);
}

async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 20; i++) await Promise.resolve();
  return done;
}

describe('MemoryFs (the in-memory twin of the file-system seam)', () => {
  it('behaves like a file system: directories, files, rename, link, unlink, errors with codes', async () => {
    const fs = new MemoryFs();
    await fs.mkdir('/d');
    await expect(fs.mkdir('/d')).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(fs.mkdir('/x/y')).rejects.toMatchObject({ code: 'ENOENT' });
    await put(fs, '/d/a', 'hello', true);
    expect(await fs.stat('/d/a')).toEqual({ isDirectory: false, size: 5 });
    expect(await fs.stat('/d')).toEqual({ isDirectory: true, size: 0 });
    await expect(fs.open('/d/a', 'wx')).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(fs.open('/d/none', 'r+')).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(fs.readdir('/d/a')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await fs.link('/d/a', '/d/b');
    await expect(fs.link('/d/a', '/d/b')).rejects.toMatchObject({ code: 'EEXIST' });
    await fs.rename('/d/b', '/d/c');
    expect((await fs.readdir('/d')).sort()).toEqual(['a', 'c']);
    await fs.unlink('/d/a');
    await expect(fs.unlink('/d/a')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await read(fs, '/d/c')).toBe('hello');
    const fh = await fs.open('/d/c', 'r+');
    await fh.write(Buffer.from('J'), 0);
    await fh.write(Buffer.from('!'), 7); // past the end: a hole of zeros
    expect(await fs.readFile('/d/c')).toEqual(Buffer.from('Jello\0\0!'));
    await fh.truncate(2);
    expect(await read(fs, '/d/c')).toBe('Je');
    await fh.close();
    await expect(fh.write(Buffer.from('x'), 0)).rejects.toMatchObject({ code: 'EBADF' });
  });

  it('a power loss keeps only what was fdatasynced, and only names whose directory was fsynced', async () => {
    let fs = new MemoryFs();
    await fs.mkdir('/d');
    await fs.syncDir('/');
    await put(fs, '/d/synced', 'durable', true);
    await put(fs, '/d/unsynced', 'lost', false);
    await fs.syncDir('/d');
    await put(fs, '/d/no-dir-fsync', 'data synced, name not', true);
    await fs.rename('/d/synced', '/d/renamed'); // not made durable
    const fh = await fs.open('/d/unsynced', 'r+');
    fs = fs.crash({ kind: 'power' });
    expect((await fs.readdir('/d')).sort()).toEqual(['synced', 'unsynced']);
    expect(await read(fs, '/d/synced')).toBe('durable');
    expect(await read(fs, '/d/unsynced')).toBe('');
    // The old process's handle is dead: its operations never complete.
    expect(await settled(fh.write(Buffer.from('x'), 0))).toBe(false);
  });

  it('a process crash keeps everything the kernel accepted (until a power loss)', async () => {
    let fs = new MemoryFs();
    await put(fs, '/f', 'page cache', false);
    fs = fs.crash({ kind: 'process' });
    expect(await read(fs, '/f')).toBe('page cache');
    fs = fs.crash({ kind: 'power' });
    expect(await read(fs, '/f')).toBeUndefined(); // the name was never fsynced either
  });

  it('tears unsynced writes at any byte: a prefix of them, the next one cut, optionally zero-filled', async () => {
    const setup = async () => {
      const fs = new MemoryFs();
      const fh = await fs.open('/f', 'w');
      await fs.syncDir('/');
      await fh.write(Buffer.from('AAAA'), 0);
      await fh.datasync();
      await fh.write(Buffer.from('BBBB'), 4);
      await fh.write(Buffer.from('CCCC'), 8);
      return fs;
    };
    // keep 1 unsynced write, then 2 bytes of the next
    expect(await read((await setup()).crash({ kind: 'power', random: draws(1, 2) }), '/f')).toBe(
      'AAAABBBBCC',
    );
    // keep none, 3 bytes of the first, zero-filled to its end
    const zeroed = (await setup()).crash({ kind: 'power', random: draws(0, 3, 1), zeroFill: true });
    expect(await zeroed.readFile('/f')).toEqual(Buffer.from('AAAABBB\0'));
    // keep both
    expect(await read((await setup()).crash({ kind: 'power', random: draws(2) }), '/f')).toBe('AAAABBBBCCCC');
  });

  it('a failed fdatasync (EIO) drops the dirty data from the durable path, as Linux does', async () => {
    let fs = new MemoryFs();
    const fh = await fs.open('/f', 'w');
    await fs.syncDir('/');
    await fh.write(Buffer.from('one'), 0);
    fs.faults = { syncError: () => 'EIO' };
    await expect(fh.datasync()).rejects.toMatchObject({ code: 'EIO' });
    fs.faults = {};
    await fh.datasync(); // "succeeds" without the data
    expect(await read(fs, '/f')).toBe('one'); // still in the page cache
    fs = fs.crash({ kind: 'power' });
    expect(await read(fs, '/f')).toBe('');
  });

  it('flips bits at rest and in flight, fails writes, and awaits a delay hook before every operation', async () => {
    const fs = new MemoryFs();
    await put(fs, '/f', 'abc', true);
    fs.flipBit('/f', 1, 0);
    expect(await read(fs, '/f')).toBe('acc');
    expect(fs.durableContent('/f')).toEqual(Buffer.from('acc'));
    fs.faults = {
      onWrite: (_p, _pos, data) => {
        data[0] = data[0]! ^ 0x20;
        return undefined;
      },
    };
    await put(fs, '/g', 'xyz', true);
    expect(await read(fs, '/g')).toBe('Xyz');
    fs.faults = { onWrite: () => 'ENOSPC' };
    await expect(put(fs, '/h', 'x', true)).rejects.toMatchObject({ code: 'ENOSPC' });
    const ops: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    fs.faults = {
      delay: (op, p) => {
        ops.push(`${op} ${p}`);
        return op === 'readFile' ? gate : undefined;
      },
    };
    const pending = fs.readFile('/f');
    expect(await settled(pending)).toBe(false);
    release();
    expect((await pending).toString()).toBe('acc');
    expect(ops).toEqual(['readFile /f']);
  });
});

describe('MemoryFs synchronous calls (the SDK lease cache inside the simulation)', () => {
  it('keeps through a power loss only a file written with fsync whose name was made durable', () => {
    let wall = 1000;
    const fs = new MemoryFs({ wallMs: () => wall });
    fs.writeFileNow('/synced', Buffer.from('a'), true);
    fs.writeFileNow('/unsynced', Buffer.from('b'), false);
    fs.syncDirNow('/');
    fs.writeFileNow('/named-late', Buffer.from('c'), true); // its name is not durable
    wall = 2000;
    fs.touchNow('/synced');
    expect(fs.mtimeNow('/synced')).toBe(2000);
    expect(fs.mtimeNow('/unsynced')).toBe(1000);
    const after = fs.crash({ kind: 'power' });
    expect(after.readFileNow('/synced').toString()).toBe('a');
    expect(after.readFileNow('/unsynced').toString()).toBe('');
    expect(() => after.readFileNow('/named-late')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => fs.readFileNow('/synced')).toThrow(expect.objectContaining({ code: 'EIO' }));
  });

  it('links atomically (EEXIST), renames and unlinks like the async calls', () => {
    const fs = new MemoryFs();
    fs.writeFileNow('/t', Buffer.from('x'), true);
    fs.linkNow('/t', '/lock');
    expect(() => fs.linkNow('/t', '/lock')).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    fs.renameNow('/lock', '/aside');
    fs.unlinkNow('/t');
    expect(fs.readFileNow('/aside').toString()).toBe('x');
    expect(() => fs.unlinkNow('/t')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});
