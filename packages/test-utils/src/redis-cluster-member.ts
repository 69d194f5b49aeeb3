import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import net from 'node:net';
import { freePort } from './free-port.js';
import { RedisNode, type Persistence } from './redis-node.js';

const run = promisify(execFile);

/** Cluster bus ports are the client port + 10000 (Redis's default), so client ports stay below this. */
const MAX_CLIENT_PORT = 65535 - 10000;

export interface RedisClusterMemberOptions {
  /** Masters (shards). @defaultValue 3 */
  masters?: number;
  /** Replicas per master. @defaultValue 0 */
  replicasPerMaster?: number;
  /**
   * `cluster-replica-no-failover` of every replica: `yes` (a replica is never promoted on its own) or `no` (the
   * Redis default: promoted when its master fails). @defaultValue `'yes'`
   */
  replicaNoFailover?: 'yes' | 'no';
  persistence?: Persistence;
  /** Extra `redis-server` arguments for every server. */
  extraArgs?: string[];
}

/**
 * One Redis Cluster owned by a test: `masters` redis-server processes with `--cluster-enabled yes` (plus optional
 * replicas), joined by `redis-cli --cluster create`, each with its own data directory and loopback port, AOF with
 * `appendfsync always` and `noeviction` (DESIGN §3), `cluster-require-full-coverage no` (a shard that is down
 * stops serving its own slots only). Fault controls per shard; every process is stopped by pid.
 */
export class RedisClusterMember {
  private constructor(
    /** The servers, masters first (in slot order as `redis-cli --cluster create` assigns them), then replicas. */
    readonly servers: RedisNode[],
    readonly masterCount: number,
  ) {}

  static async start(options: RedisClusterMemberOptions = {}): Promise<RedisClusterMember> {
    const masters = options.masters ?? 3;
    const replicas = options.replicasPerMaster ?? 0;
    const servers: RedisNode[] = [];
    try {
      for (let i = 0; i < masters * (1 + replicas); i++) {
        // Every server gets the setting: `redis-cli --cluster create` picks which ones become replicas.
        servers.push(
          await startClusterServer(
            [
              ...(replicas > 0 ? ['--cluster-replica-no-failover', options.replicaNoFailover ?? 'yes'] : []),
              ...(options.extraArgs ?? []),
            ],
            options.persistence,
          ),
        );
      }
      if (masters < 3) {
        // `redis-cli --cluster create` wants three masters at least: smaller clusters are joined by hand.
        if (replicas > 0) throw new Error('replicas need at least three masters here');
        const per = Math.ceil(16384 / masters);
        for (let i = 0; i < masters; i++) {
          const port = String(servers[i]!.port);
          const last = Math.min(16383, (i + 1) * per - 1);
          await run('redis-cli', ['-p', port, 'CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(last)]);
          await run('redis-cli', ['-p', port, 'CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1)]);
          if (i > 0) {
            await run('redis-cli', ['-p', port, 'CLUSTER', 'MEET', '127.0.0.1', String(servers[0]!.port)]);
          }
        }
        const member = new RedisClusterMember(servers, masters);
        await member.waitUntilOk();
        return member;
      }
      await run('redis-cli', [
        '--cluster',
        'create',
        ...servers.map((s) => `127.0.0.1:${s.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ]);
      // Masters first, in the order they were given (the roles are redis-cli's choice).
      const roles = await Promise.all(
        servers.map((s) =>
          run('redis-cli', ['-p', String(s.port), 'ROLE']).then((r) => r.stdout.split('\n')[0]),
        ),
      );
      const ordered = [
        ...servers.filter((_, i) => roles[i] === 'master'),
        ...servers.filter((_, i) => roles[i] !== 'master'),
      ];
      const member = new RedisClusterMember(ordered, masters);
      await member.waitUntilOk();
      await member.waitForReplicas(masters * replicas);
      return member;
    } catch (error) {
      await Promise.all(servers.map((s) => s.stop()));
      throw error;
    }
  }

  /** Seed URLs of every server (any one is enough for a client to find the rest). */
  get urls(): string[] {
    return this.servers.slice(0, this.masterCount).map((s) => s.url);
  }

  /** The cluster form of the library's `nodes` option. */
  get member(): { cluster: string[] } {
    return { cluster: this.urls };
  }

  /** `FENCED_REDIS_URLS` form of this member: `cluster:redis://a+redis://b+...`. */
  get envForm(): string {
    return `cluster:${this.urls.join('+')}`;
  }

  /** The masters, in the order `redis-cli --cluster create` gave them slot ranges. */
  get masters(): RedisNode[] {
    return this.servers.slice(0, this.masterCount);
  }

  /** The replicas (empty unless asked for). */
  get replicas(): RedisNode[] {
    return this.servers.slice(this.masterCount);
  }

  /** The slot ranges a server serves as a master, from CLUSTER SLOTS: `[start, end]` inclusive. */
  async slotsOf(server: RedisNode): Promise<[number, number][]> {
    return (await this.clusterSlots()).filter(([, , port]) => port === server.port).map(([s, e]) => [s, e]);
  }

  /** The master serving `slot`. */
  async masterOf(slot: number): Promise<RedisNode> {
    const port = (await this.clusterSlots()).find(([s, e]) => slot >= s && slot <= e)?.[2];
    const master = this.servers.find((s) => s.port === port);
    if (master === undefined) throw new Error(`slot ${slot} is not served`);
    return master;
  }

  /** CLUSTER SLOTS of the first reachable server: `[start, end, master port]`. */
  async clusterSlots(): Promise<[number, number, number][]> {
    for (const server of this.servers) {
      if (!server.running) continue;
      const { stdout } = await run('redis-cli', [
        '-2',
        '--json',
        '-p',
        String(server.port),
        'CLUSTER',
        'SLOTS',
      ]);
      const ranges = JSON.parse(stdout) as [number, number, [string, number, string]][];
      return ranges.map(([start, end, master]) => [start, end, master[1]]);
    }
    throw new Error('no server of the cluster is running');
  }

  /** Kills one shard's master and starts it again on the same port with its cluster config but no data. */
  async restartShardWithoutData(master: RedisNode): Promise<void> {
    await master.restart({ keepData: false, keepFiles: ['nodes.conf'] });
    await this.waitUntilOk();
  }

  /** Kills one server and starts it again with its data. */
  async restartShard(master: RedisNode): Promise<void> {
    await master.restart();
    await this.waitUntilOk();
  }

  /**
   * Moves `slot` from the master serving it to `to` (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE of every key in
   * batches, SETSLOT NODE on both): the procedure `redis-cli --cluster reshard` runs, one slot at a time. `between`
   * runs after the slot is marked migrating and some keys moved, so a test can act mid-migration.
   */
  async migrateSlot(slot: number, to: RedisNode, between?: () => Promise<void>): Promise<void> {
    const slots = await this.clusterSlots();
    const fromPort = slots.find(([s, e]) => slot >= s && slot <= e)?.[2];
    if (fromPort === undefined) throw new Error(`slot ${slot} is not served`);
    if (fromPort === to.port) return;
    const cli = (port: number, ...args: string[]) =>
      run('redis-cli', ['-p', String(port), ...args]).then((r) => r.stdout.trim());
    const fromId = await cli(fromPort, 'CLUSTER', 'MYID');
    const toId = await cli(to.port, 'CLUSTER', 'MYID');
    await cli(to.port, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId);
    await cli(fromPort, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId);
    let first = true;
    for (;;) {
      const keys = (await cli(fromPort, 'CLUSTER', 'GETKEYSINSLOT', String(slot), '10'))
        .split('\n')
        .filter((k) => k !== '');
      if (keys.length === 0) break;
      await cli(fromPort, 'MIGRATE', '127.0.0.1', String(to.port), '', '0', '5000', 'KEYS', ...keys);
      if (first && between !== undefined) await between();
      first = false;
    }
    if (first && between !== undefined) await between();
    await cli(to.port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
    await cli(fromPort, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
    for (const server of this.masters) {
      if (server.running && server.port !== fromPort && server.port !== to.port) {
        await cli(server.port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', toId).catch(() => undefined);
      }
    }
  }

  /** Waits until every master's CLUSTER SLOTS lists `count` replicas in all. */
  async waitForReplicas(count: number, timeoutMs = 20_000): Promise<void> {
    if (count === 0) return;
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      let everywhere = true;
      for (const server of this.masters) {
        const { stdout } = await run('redis-cli', [
          '-2',
          '--json',
          '-p',
          String(server.port),
          'CLUSTER',
          'SLOTS',
        ]);
        const ranges = JSON.parse(stdout) as unknown[][];
        if (ranges.reduce((n, r) => n + r.length - 3, 0) < count) everywhere = false;
      }
      if (everywhere) return;
      if (performance.now() > deadline) throw new Error(`the cluster did not list ${count} replicas`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Waits until every running server reports `cluster_state:ok`. */
  async waitUntilOk(timeoutMs = 20_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      let ok = true;
      for (const server of this.servers) {
        if (!server.running) continue;
        const info = await run('redis-cli', ['-p', String(server.port), 'CLUSTER', 'INFO']).then(
          (r) => r.stdout,
          () => '',
        );
        if (!/cluster_state:ok/.test(info)) ok = false;
      }
      if (ok) return;
      if (performance.now() > deadline) throw new Error('the cluster did not reach cluster_state:ok');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Stops every server (by pid) and removes their data. */
  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}

async function startClusterServer(extraArgs: string[], persistence?: Persistence): Promise<RedisNode> {
  for (let attempt = 0; ; attempt++) {
    let port = await freePort();
    while (port > MAX_CLIENT_PORT || !(await portFree(port + 10000))) port = await freePort();
    try {
      return await RedisNode.start({
        port,
        ...(persistence === undefined ? {} : { persistence }),
        extraArgs: [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '5000',
          '--cluster-require-full-coverage',
          'no',
          ...extraArgs,
        ],
      });
    } catch (error) {
      if (attempt >= 4) throw error;
    }
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
