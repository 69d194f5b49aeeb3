// The servers of the fencing peers: a 3-member etcd cluster and a 3-server ZooKeeper ensemble, each started here on
// loopback in a temporary data directory and stopped by process id. Where the machine lacks one, `locate*`
// says so in one line and the bench skips that peer.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@fenced/test-utils/free-port';
import { own, waitForExit } from '@fenced/test-utils/owned-processes';
import { etcdMemberArgs, etcdMembers, zooConfig, zooServers } from './peer-config.js';

const INSTALL_HINT = 'FENCED_BENCH_PEERS=1 bash scripts/setup.sh installs it';
const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';
/** Debian's log4j.properties for the ZooKeeper jar (the server logs through it). */
const ZOOKEEPER_CONF_DIR = '/etc/zookeeper/conf';

/** A server process group started here: its pids (for CPU accounting), its client endpoints and its stop. */
export interface PeerServer {
  readonly version: string;
  readonly endpoints: string[];
  readonly pids: number[];
  stop(): Promise<void>;
}

function onPathSync(command: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    const file = path.join(dir, command);
    if (dir.length > 0 && existsSync(file)) return file;
  }
  return undefined;
}

/** The etcd binary, or why the etcd peer is skipped. */
export function locateEtcd(env: NodeJS.ProcessEnv = process.env): { binary: string } | { missing: string } {
  const binary = onPathSync('etcd', env);
  return binary === undefined
    ? { missing: `etcd not installed (Debian package etcd-server; ${INSTALL_HINT})` }
    : { binary };
}

/** java and the ZooKeeper jar, or why the ZooKeeper peer is skipped. */
export function locateZookeeper(
  env: NodeJS.ProcessEnv = process.env,
  jar = ZOOKEEPER_JAR,
): { java: string; jar: string } | { missing: string } {
  const java = onPathSync('java', env);
  if (java === undefined || !existsSync(jar)) {
    return { missing: `ZooKeeper not installed (Debian package zookeeper; ${INSTALL_HINT})` };
  }
  return { java, jar };
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function stopChildren(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid, 'SIGKILL');
      }
      await waitForExit(child);
    }),
  );
}

function startOwned(command: string, args: readonly string[], log: string[]): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  own(child);
  const keep = (chunk: Buffer): void => {
    log.push(chunk.toString('utf8'));
    if (log.length > 50) log.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return child;
}

async function waitUntil(
  what: string,
  ready: () => Promise<boolean>,
  children: readonly ChildProcess[],
  log: string[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const dead = children.find((c) => c.exitCode !== null || c.signalCode !== null);
    if (dead !== undefined) {
      throw new Error(
        `${what} exited (${dead.exitCode ?? dead.signalCode}) before it was ready: ${log.join('').slice(-600)}`,
      );
    }
    if (await ready()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what} was not ready within ${timeoutMs} ms: ${log.join('').slice(-600)}`);
}

/**
 * Three etcd members bootstrapped statically on loopback (etcd's clustering guide), ready once a
 * linearizable read through the client answers (a leader is elected).
 */
export async function startEtcdCluster(
  binary: string,
  isHealthy: (endpoints: string[]) => Promise<boolean>,
  size = 3,
): Promise<PeerServer> {
  const members = etcdMembers(size, await distinctFreePorts(size * 2));
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-bench-etcd-'));
  const token = `fenced-bench-${randomBytes(4).toString('hex')}`;
  const log: string[] = [];
  const children = members.map((member) =>
    startOwned(binary, etcdMemberArgs(member, members, path.join(root, member.name), token), log),
  );
  const endpoints = members.map((m) => `http://127.0.0.1:${m.clientPort}`);
  const stop = async (): Promise<void> => {
    await stopChildren(children);
    await fs.rm(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  };
  try {
    await waitUntil('etcd', () => isHealthy(endpoints), children, log, 30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { version: commandVersion(binary), endpoints, pids: children.map((c) => c.pid!), stop };
}

function commandVersion(binary: string): string {
  // `etcd --version` prints "etcd Version: 3.4.23".
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  return /Version:\s*(\S+)/.exec(out)?.[1] ?? 'unknown';
}

/**
 * A ZooKeeper ensemble of `size` servers (`QuorumPeerMain`, 3 by default, as the administrator's guide asks for)
 * on loopback with {@link zooConfig}, ready once every server reports itself leader or follower (`srvr`).
 */
export async function startZookeeper(java: string, jar: string, size = 3): Promise<PeerServer> {
  const servers = zooServers(size, await distinctFreePorts(size * 3));
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-bench-zookeeper-'));
  const log: string[] = [];
  const children: ChildProcess[] = [];
  const stop = async (): Promise<void> => {
    await stopChildren(children);
    await fs.rm(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  };
  try {
    for (const server of servers) {
      const dir = path.join(root, `s${server.id}`);
      await fs.mkdir(path.join(dir, 'data'), { recursive: true });
      await fs.writeFile(path.join(dir, 'data', 'myid'), `${server.id}\n`);
      const config = path.join(dir, 'zoo.cfg');
      await fs.writeFile(config, zooConfig(server, servers, path.join(dir, 'data')));
      children.push(
        startOwned(
          java,
          [
            '-Xmx256m',
            '-cp',
            `${ZOOKEEPER_CONF_DIR}:${jar}`,
            '-Dzookeeper.root.logger=WARN,CONSOLE',
            `-Dzookeeper.log.dir=${dir}`,
            size > 1
              ? 'org.apache.zookeeper.server.quorum.QuorumPeerMain'
              : 'org.apache.zookeeper.server.ZooKeeperServerMain',
            config,
          ],
          log,
        ),
      );
    }
    const serving = async (): Promise<boolean> => {
      const modes = await Promise.all(servers.map((s) => fourLetterWord(s.clientPort, 'srvr')));
      return modes.every((reply) => /Mode: (leader|follower|standalone)/.test(reply));
    };
    await waitUntil('ZooKeeper', serving, children, log, 90_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const srvr = await fourLetterWord(servers[0]!.clientPort, 'srvr');
  const version = /version:\s*([\d.]+)/i.exec(srvr)?.[1] ?? 'unknown';
  return {
    version,
    endpoints: servers.map((s) => `127.0.0.1:${s.clientPort}`),
    pids: children.map((c) => c.pid!),
    stop,
  };
}

function fourLetterWord(port: number, word: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(2_000, () => socket.destroy());
    socket.once('connect', () => socket.write(word));
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString('utf8')));
    socket.once('close', () => resolve(reply));
    socket.once('error', () => resolve(''));
  });
}

/** Whether something accepts connections on the port (used before the client connects). */
export const portAnswers = connects;

/**
 * CPU seconds (user + system) of processes, from /proc/<pid>/stat, including the children they have waited
 * for (Postgres' exited backends). Linux only; elsewhere NaN, and the bench prints –.
 */
export function processCpuSeconds(pids: readonly number[], withLiveChildren = false): number {
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  const wanted = new Set(pids);
  try {
    const stat = (pid: number): string[] | undefined => {
      try {
        const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // The command name is in parentheses and may hold spaces: the fields start after the last ')'.
        return text.slice(text.lastIndexOf(')') + 2).split(' ');
      } catch {
        return undefined;
      }
    };
    // Fields after the name: [1] ppid, [11] utime, [12] stime, [13] cutime, [14] cstime.
    for (const pid of pids) {
      const fields = stat(pid);
      if (fields === undefined) continue;
      total += fields.slice(11, 15).reduce((a, f) => a + Number(f), 0);
    }
    if (withLiveChildren) {
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        const fields = stat(Number(entry));
        if (fields !== undefined && wanted.has(Number(fields[1]))) {
          total += Number(fields[11]) + Number(fields[12]);
        }
      }
    }
  } catch {
    return Number.NaN;
  }
  return total / ticks;
}
