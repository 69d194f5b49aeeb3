import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { INSTALL_SETS, PUBLIC_PACKAGES } from '../../../scripts/pack.js';

interface Manifest {
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const manifest = (folder: string): Manifest =>
  JSON.parse(
    readFileSync(new URL(`../../../packages/${folder}/package.json`, import.meta.url), 'utf8'),
  ) as Manifest;

/** The @fenced packages (as folders) that `folder` cannot be installed without: none of them is on npm. */
function fencedNeeds(folder: string): string[] {
  const m = manifest(folder);
  const required = [
    ...Object.keys(m.dependencies ?? {}),
    ...Object.keys(m.peerDependencies ?? {}).filter(
      (name) => m.peerDependenciesMeta?.[name]?.optional !== true,
    ),
  ];
  return required.filter((name) => name.startsWith('@fenced/')).map((name) => name.slice('@fenced/'.length));
}

describe("npm run pack's install sets", () => {
  it.each(INSTALL_SETS.map((set) => [set.use, set] as const))(
    '%s: every @fenced package the set needs is in it',
    (_use, set) => {
      for (const folder of set.folders) {
        expect(PUBLIC_PACKAGES).toContain(folder);
        for (const needed of fencedNeeds(folder))
          expect(set.folders, `${folder} needs ${needed}`).toContain(needed);
      }
    },
  );

  it('names a set for every public package', () => {
    const covered = new Set(INSTALL_SETS.flatMap((set) => set.folders));
    expect([...covered].sort()).toEqual([...PUBLIC_PACKAGES].sort());
  });
});
