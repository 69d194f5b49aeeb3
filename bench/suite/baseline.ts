// `--baseline-ref REF`: an earlier fenced, measured beside the current one on the same nodes in the same run.
//
// REF is checked out into a temporary git worktree (`git worktree add --detach`), and its @fenced/coordinator is
// loaded from its *sources* (packages/coordinator/src/index.ts, through the same tsx loader and the
// `@fenced/source` condition the bench runs with; its Lua files sit next to them). Its third-party dependencies
// resolve from this checkout's node_modules (the same installed versions), but its own workspace packages
// (`@fenced/shared`, …) resolve to the *old* sources: the worktree gets a node_modules of its own whose entries
// link to this checkout's, except `@fenced/*`, which link to the worktree's packages. The worktree is removed at
// the end of the run.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  reopeningBackground,
  type FencedBenchOptions,
  type HeldLock,
  type LockLibrary,
} from './lock-library.js';

/**
 * The key prefix of the earlier fenced: its own namespace on the shared nodes (its own incarnation key, its own
 * registers), and as long as the current fenced's `fenced`, so both write keys of the same length and their AOF
 * bytes per cycle compare.
 */
export const BASELINE_KEY_PREFIX = 'before';

export interface BaselineCheckout {
  /** As given on the command line. */
  readonly ref: string;
  /** The full commit it resolved to. */
  readonly commit: string;
  /** The worktree's root. */
  readonly dir: string;
  /** Removes the worktree (and its temporary folder); never throws. */
  remove(): Promise<void>;
}

function git(root: string, args: string[]): string {
  const result = spawnSync('git', args, { cwd: root, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(
      `git ${args.join(' ')} failed: ${(result.stderr ?? '').trim() || `exit ${result.status}`}`,
    );
  }
  return result.stdout.trim();
}

/** Checks out `ref` of the repository at `root` into a temporary worktree and links its node_modules. */
export async function checkOutBaseline(root: string, ref: string): Promise<BaselineCheckout> {
  const commit = git(root, ['rev-parse', '--verify', '--end-of-options', `${ref}^{commit}`]);
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-baseline-'));
  const dir = path.join(parent, commit.slice(0, 12));
  const remove = async (): Promise<void> => {
    spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: root, encoding: 'utf8' });
    await fs.rm(parent, { recursive: true, force: true }).catch(() => undefined);
    spawnSync('git', ['worktree', 'prune'], { cwd: root, encoding: 'utf8' });
  };
  try {
    git(root, ['worktree', 'add', '--detach', dir, commit]);
    await linkNodeModules(root, dir);
  } catch (error) {
    await remove();
    throw error;
  }
  return { ref, commit, dir, remove };
}

/**
 * `<dir>/node_modules`: a link to each entry of `<root>/node_modules` (same versions, same module instances),
 * except `@fenced`, whose packages link to the worktree's own `packages/*`.
 */
async function linkNodeModules(root: string, dir: string): Promise<void> {
  const from = path.join(root, 'node_modules');
  const to = path.join(dir, 'node_modules');
  await fs.mkdir(to);
  for (const entry of await fs.readdir(from)) {
    if (entry === '@fenced') continue;
    await fs.symlink(path.join(from, entry), path.join(to, entry));
  }
  await fs.mkdir(path.join(to, '@fenced'));
  const packages = path.join(dir, 'packages');
  for (const folder of await fs.readdir(packages)) {
    let name: string;
    try {
      name = (
        JSON.parse(await fs.readFile(path.join(packages, folder, 'package.json'), 'utf8')) as { name: string }
      ).name;
    } catch {
      continue;
    }
    if (name.startsWith('@fenced/')) {
      await fs.symlink(path.join(packages, folder), path.join(to, '@fenced', name.slice('@fenced/'.length)));
    }
  }
}

/** The little of the earlier Coordinator the bench uses. */
interface BaselineCoordinator {
  ready(): Promise<void>;
  acquire(resource: string, options: { ttlMs: number; waitMs?: number }): Promise<HeldLock>;
  close(): Promise<void>;
  on(event: 'nodeError', listener: () => void): unknown;
  readonly settings: Readonly<Record<string, unknown>>;
}

/**
 * The earlier fenced as a library named `fenced@<ref>`: the Coordinator of the checkout's sources, configured as
 * the current one (`maxTtlMs`, `nodeTimeoutMs`) but for `tokenRetentionMs`, which it does not have, and its own
 * key prefix ({@link BASELINE_KEY_PREFIX}).
 */
export async function createBaselineFenced(
  checkout: BaselineCheckout,
  urls: readonly string[],
  bench: FencedBenchOptions,
): Promise<LockLibrary> {
  const entry = path.join(checkout.dir, 'packages', 'coordinator', 'src', 'index.ts');
  // The old coordinator must see the old shared sources, not this checkout's.
  const shared = await fs.realpath(createRequire(entry).resolve('@fenced/shared'));
  const worktree = await fs.realpath(checkout.dir);
  if (!shared.startsWith(worktree + path.sep)) {
    throw new Error(
      `@fenced/shared of ${checkout.ref} resolves to ${shared}, outside its worktree ${worktree}`,
    );
  }
  const module = (await import(pathToFileURL(entry).href)) as {
    Coordinator: new (options: Record<string, unknown>) => BaselineCoordinator;
  };
  let coordinator: BaselineCoordinator;
  const open = async (): Promise<void> => {
    coordinator = new module.Coordinator({
      nodes: [...urls],
      keyPrefix: BASELINE_KEY_PREFIX,
      maxTtlMs: bench.maxTtlMs,
      ...(bench.nodeTimeoutMs === undefined ? {} : { nodeTimeoutMs: bench.nodeTimeoutMs }),
    });
    coordinator.on('nodeError', () => undefined);
    try {
      await coordinator.ready();
    } catch (error) {
      await coordinator.close().catch(() => undefined);
      throw error;
    }
  };
  await open();
  const settings = coordinator!.settings;
  const version = (
    JSON.parse(readFileSync(path.join(checkout.dir, 'packages', 'coordinator', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  return {
    name: `fenced@${checkout.ref}`,
    baselineCommit: checkout.commit,
    packageName: '@fenced/coordinator',
    version: `${version} (commit ${checkout.commit.slice(0, 7)}, sources from a temporary git worktree)`,
    configuration: {
      nodes: urls.length,
      keyPrefix: BASELINE_KEY_PREFIX,
      clients: 'created by the coordinator from URLs',
      nodeTimeoutMs: settings.nodeTimeoutMs,
      retryDelayMs: settings.retryDelayMs,
      retryJitterMs: settings.retryJitterMs,
      driftFactor: settings.driftFactor,
      maxTtlMs: settings.maxTtlMs,
      commit: checkout.commit,
    },
    waitStrategy: `pub/sub wake-up on release (fenced as of ${checkout.commit.slice(0, 7)})`,
    // Its fold passes, where it has them, run in the background like the current fenced's.
    background: reopeningBackground(open, () => coordinator.close()),
    acquire: (resource, ttlMs) => coordinator.acquire(resource, { ttlMs }),
    acquireWaiting: (resource, ttlMs, waitMs) => coordinator.acquire(resource, { ttlMs, waitMs }),
    close: () => coordinator.close(),
  };
}
