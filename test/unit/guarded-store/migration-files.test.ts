import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { STORE_MIGRATIONS_FOLDER } from '@fenced/guarded-store';

/**
 * Migrations are append-only: once released, a file never changes (databases that already ran it would not
 * run it again). Adding a migration means adding a line here; changing a pinned digest means a released
 * migration was edited, which is the bug this test exists to catch.
 */
const PINNED: Record<string, string> = {
  '0001_create_fence.sql': 'bb3867caccc5c170987b054a3abdd59abd5d0b9be7f3218ec6bdec4865ba5d1e',
  '0002_create_fence_operation.sql': '9012e713467d6c8d66e2e4cfb17780d615d49fd0c507b6042b8aea269d1dbd2d',
  '0003_create_fence_reset.sql': '3ad1a4cf91a051c72e11b39f63968c23a619f78d488ee68de31064ce5e3c6c2e',
  '0004_drop_fence_checks.sql': '4912343329dcf5e01e0203f8a8edeaa71c3f5b73df48d9a8d9d5cca429ba7e66',
  '0005_create_fence_function.sql': '5a948572c8dd9a0cddd5dbe08548f7557b84139d514007a197a7cfe50b26c908',
  '0006_fence_equal_token_locks.sql': 'ffa91bbd1aa371dc4a7d025efa7bc29e178ea73f8dc6ea8693754960e9fe0c74',
  'example/0001_create_documents_and_accounts.sql':
    'd6109eeb462ea832b8fc07add03eca61276540ddf4c05d0bf77f0145c2d1c695',
};

async function sqlFiles(folder: string, prefix = ''): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    if (entry.isDirectory())
      files.push(...(await sqlFiles(path.join(folder, entry.name), `${prefix}${entry.name}/`)));
    else if (entry.name.endsWith('.sql')) files.push(`${prefix}${entry.name}`);
  }
  return files.sort();
}

describe('migration files', () => {
  it('are named NNNN_description.sql and numbered without gaps', async () => {
    const files = await sqlFiles(STORE_MIGRATIONS_FOLDER);
    for (const group of ['', 'example/']) {
      const names = files.filter((f) => f.startsWith(group) && !f.slice(group.length).includes('/'));
      names.forEach((name, i) => {
        expect(name.slice(group.length)).toMatch(/^\d{4}_[a-z0-9_]+\.sql$/);
        expect(name.slice(group.length, group.length + 4)).toBe(String(i + 1).padStart(4, '0'));
      });
    }
  });

  it('never change once released', async () => {
    const files = await sqlFiles(STORE_MIGRATIONS_FOLDER);
    expect(files).toEqual(Object.keys(PINNED).sort());
    for (const file of files) {
      const text = await readFile(path.join(STORE_MIGRATIONS_FOLDER, file));
      expect(createHash('sha256').update(text).digest('hex'), file).toBe(PINNED[file]);
    }
  });
});
