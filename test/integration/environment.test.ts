import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { findOrStartPostgres, createTestSchema } from '@fenced/test-utils/postgres';

function command(port: number, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.once('error', reject);
    s.once('connect', () => s.write(line + '\r\n'));
    s.once('data', (d) => {
      resolve(d.toString());
      s.destroy();
    });
  });
}

describe('test environment', () => {
  let env: RedisNodes;
  beforeAll(async () => {
    env = await startRedisNodes(3, { useExisting: false });
  });
  afterAll(async () => {
    await env.stop();
  });

  it('starts redis nodes with fsync-always persistence and noeviction', async () => {
    const node = env.nodes[0]!;
    expect(await command(node.port, 'CONFIG GET appendfsync')).toContain('always');
    expect(await command(node.port, 'CONFIG GET maxmemory-policy')).toContain('noeviction');
  });

  it('restarts a node with its data and without it', async () => {
    const node = env.nodes[1]!;
    await command(node.port, 'SET k v');
    await node.restart({ keepData: true });
    expect(await command(node.port, 'GET k')).toContain('v');
    await node.restart({ keepData: false });
    expect(await command(node.port, 'GET k')).toBe('$-1\r\n');
  });

  it('finds or starts postgres and isolates a schema', async () => {
    const server = await findOrStartPostgres();
    const schema = await createTestSchema(server);
    expect(schema.schema).toMatch(/^fenced_test_/);
    await schema.drop();
    await server.stop();
  });
});
