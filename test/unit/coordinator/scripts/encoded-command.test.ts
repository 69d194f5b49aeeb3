// The bytes runScript writes for an EVALSHA (packages/coordinator/src/scripts/scripts.ts): exactly what ioredis
// itself would write for the same call, encoded once for every node the same call goes to, and encoded again for a
// node whose keys or arguments differ (its own seal epoch). The clients here only record the commands handed to
// them (no Redis: the real-node side is test/integration/coordinator/scripts/batching.test.ts).
import { createHash } from 'node:crypto';
import ioredis, { type Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  encodeCommand,
  loadScriptSource,
  runScript,
} from '../../../../packages/coordinator/src/scripts/scripts.js';

const { Command } = ioredis;
type SentCommand = InstanceType<typeof Command>;

/** A client that keeps the commands sent to it; `isCluster` as an ioredis Cluster client says it. */
function recordingClient(isCluster = false) {
  const sent: SentCommand[] = [];
  const client = {
    isCluster,
    sendCommand(command: SentCommand) {
      sent.push(command);
      return command.promise;
    },
  } as unknown as Redis;
  return { client, sent };
}

/** The bytes of one command as the socket receives them. */
function bytesOf(command: SentCommand): Buffer {
  const writable = command.toWritable({});
  return Buffer.isBuffer(writable) ? writable : Buffer.from(writable, 'utf8');
}

/** What ioredis writes for the same EVALSHA, encoded by ioredis' own Command. */
function ioredisBytes(sha: string, keys: readonly string[], args: readonly (string | number)[]): Buffer {
  return bytesOf(new Command('evalsha', [sha, keys.length, ...keys, ...args]));
}

const shaOf = (name: 'acquire' | 'release' | 'inspect') =>
  createHash('sha1').update(loadScriptSource(name)).digest('hex');

const acquireKeys = [
  'fenced:node:incarnation',
  'fenced:node:floor',
  'fenced:node:seal',
  'fenced:node:settings',
  'fenced:{r1}:lease',
  'fenced:{r1}:record',
  'fenced:{r1}:token',
];
/** One batched acquire's arguments for a node that last saw seal epoch `epoch` (ARGV[4]), node count 5 last. */
const acquireArgs = (epoch: string): (string | number)[] => [
  'lease-id-0123456789abcd',
  10_000,
  '1900000000000000001',
  epoch,
  5,
];

describe('encodeCommand', () => {
  it("writes ioredis' own bytes: ASCII, UTF-8 beyond it, empty arguments, numbers made strings", () => {
    const cases: string[][] = [
      ['abc', '3', 'key', ''],
      ['fenced:{kötü-ключ-鍵}:lease', '1', 'x'],
      ['emoji 🔒 key', '', '\r\n inside'],
      [],
    ];
    for (const argv of cases) {
      expect(encodeCommand('evalsha', argv)).toEqual(bytesOf(new Command('evalsha', argv)));
    }
  });
});

describe('runScript to standalone nodes', () => {
  it('encodes a batch sent to five nodes once, each byte as ioredis would send it, and gives each node its own command', async () => {
    const nodes = Array.from({ length: 5 }, () => recordingClient());
    const replies = nodes.map(({ client }) => runScript(client, 'acquire', acquireKeys, acquireArgs('')));
    const commands = nodes.map(({ sent }) => sent[0]!);
    const expected = ioredisBytes(shaOf('acquire'), acquireKeys, acquireArgs(''));
    for (const command of commands) {
      expect(bytesOf(command)).toEqual(expected);
      // One encoding, written to every socket.
      expect(command.toWritable({})).toBe(commands[0]!.toWritable({}));
      // What ioredis shows of the command (debug output, tracing) is the call, as strings.
      expect(command.args).toEqual([shaOf('acquire'), '7', ...acquireKeys, ...acquireArgs('').map(String)]);
    }
    expect(new Set(commands).size).toBe(5);
    // Each node's reply is its own.
    commands.forEach((command, i) => command.resolve([[i]]));
    expect(await Promise.all(replies)).toEqual([[[0]], [[1]], [[2]], [[3]], [[4]]]);
  });

  it('encodes again for a node whose seal epoch differs, and for the nodes after it', () => {
    const epochs = ['', '', 'sealed-epoch-2', '', ''];
    const nodes = epochs.map(() => recordingClient());
    epochs.forEach(
      (epoch, i) => void runScript(nodes[i]!.client, 'acquire', acquireKeys, acquireArgs(epoch)),
    );
    epochs.forEach((epoch, i) => {
      expect(bytesOf(nodes[i]!.sent[0]!)).toEqual(
        ioredisBytes(shaOf('acquire'), acquireKeys, acquireArgs(epoch)),
      );
    });
    expect(bytesOf(nodes[2]!.sent[0]!).includes('sealed-epoch-2')).toBe(true);
    expect(bytesOf(nodes[1]!.sent[0]!).includes('sealed-epoch-2')).toBe(false);
    expect(bytesOf(nodes[3]!.sent[0]!).includes('sealed-epoch-2')).toBe(false);
  });

  it('never reuses an encoding for other keys, another script, or arguments the caller changed after sending', () => {
    const a = recordingClient();
    const b = recordingClient();
    const c = recordingClient();
    // A call not encoded before (its own lease id), so its encoding is made from this very array.
    const args = acquireArgs('');
    args[0] = 'lease-id-changed-afterwards';
    void runScript(a.client, 'acquire', acquireKeys, args);
    // The caller's array changed after the call: the next call with it carries what it holds now.
    args[2] = '1900000000000000002';
    void runScript(b.client, 'acquire', acquireKeys, args);
    expect(bytesOf(b.sent[0]!)).toEqual(ioredisBytes(shaOf('acquire'), acquireKeys, args));
    const otherKeys = acquireKeys.map((k) => k.replace('{r1}', '{r2}'));
    void runScript(c.client, 'acquire', otherKeys, args);
    expect(bytesOf(c.sent[0]!)).toEqual(ioredisBytes(shaOf('acquire'), otherKeys, args));
    // release.lua with the same keys and arguments is another script: its own SHA1.
    const releaseKeys = ['fenced:{r1}:lease', 'fenced:{r1}:record'];
    const releaseArgs = ['lease-id-0123456789abcd', 'fenced:{r1}:channel'];
    void runScript(a.client, 'release', releaseKeys, releaseArgs);
    void runScript(b.client, 'inspect', ['fenced:node:incarnation', ...releaseKeys], []);
    expect(bytesOf(a.sent[1]!)).toEqual(ioredisBytes(shaOf('release'), releaseKeys, releaseArgs));
    expect(bytesOf(b.sent[1]!)).toEqual(
      ioredisBytes(shaOf('inspect'), ['fenced:node:incarnation', ...releaseKeys], []),
    );
  });

  it('sends a number and its decimal string alike, as ioredis does', () => {
    const a = recordingClient();
    const b = recordingClient();
    void runScript(a.client, 'acquire', acquireKeys, acquireArgs(''));
    void runScript(b.client, 'acquire', acquireKeys, acquireArgs('').map(String));
    expect(bytesOf(b.sent[0]!)).toEqual(bytesOf(a.sent[0]!));
  });
});

describe('runScript to a Cluster member', () => {
  it('hands ioredis a plain command, whose keys it routes by', () => {
    const { client, sent } = recordingClient(true);
    void runScript(client, 'acquire', acquireKeys, acquireArgs(''));
    const [command] = sent;
    expect(command!.constructor).toBe(Command);
    expect(command!.getKeys()).toEqual(acquireKeys);
    expect(bytesOf(command!)).toEqual(ioredisBytes(shaOf('acquire'), acquireKeys, acquireArgs('')));
  });
});
