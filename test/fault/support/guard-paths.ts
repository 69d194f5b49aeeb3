// The guard paths of the fault suite are the counter worker's (@fenced/test-utils/counter-worker/guard-paths):
// the counter's fenced read-modify-write through the Kysely store, node-postgres with PgGuard, Prisma with
// PrismaGuard and Drizzle with DrizzleGuard. What the suite adds: the Prisma client of the counter tables.
import { generatePrismaClientFile, removeGeneratedPrismaClient } from '../../fixtures/prisma-client.js';

export { GUARD_PATHS, type GuardPath } from '@fenced/test-utils/counter-worker/counter-store';
export { openCounterStore, type CounterStoreOptions } from '@fenced/test-utils/counter-worker/guard-paths';

/**
 * Generates the Prisma client of the counter tables (counter-worker/counter.prisma) into .tmp/ and returns its
 * entry module, for `CounterStoreOptions.prismaClient` (a worker process imports it itself). About a second.
 */
export function prismaClientFile(): string {
  return generatePrismaClientFile('packages/test-utils/src/counter-worker/counter.prisma');
}

/** Removes the client `prismaClientFile()` generated (once no process uses it). */
export function removePrismaClientFile(file: string): void {
  removeGeneratedPrismaClient(file);
}
