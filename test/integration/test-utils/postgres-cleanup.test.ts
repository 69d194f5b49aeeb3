import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const FIXTURE = fileURLToPath(new URL('./fixtures/throwaway-postgres.ts', import.meta.url));

describe('throw-away Postgres cluster', () => {
  it('is shut down by pid when the process that started it is interrupted', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, FENCED_DATABASE_URL: '' },
    });
    let dataDir: string | undefined;
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        child.once('exit', (code) => reject(new Error(`fixture exited with ${code} before reporting`)));
      });
      const reported = JSON.parse(line) as { dataDir: string; pid: number };
      const pid = reported.pid;
      dataDir = reported.dataDir;
      expect(existsSync(`/proc/${pid}`)).toBe(true);

      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      const deadline = performance.now() + 5_000;
      while (existsSync(`/proc/${pid}`) && performance.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(existsSync(`/proc/${pid}`)).toBe(false);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      // The interrupted process could only stop the postmaster; its data directory is ours to remove.
      if (dataDir?.includes('fenced-pg-') === true) await rm(dataDir, { recursive: true, force: true });
    }
  });
});
