import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
// Through `module.exports` (the Redis class, carrying `Command` in ioredis 4 and 5 alike): ioredis 4 has no
// named ESM exports, so `import { Command }` would fail where it is installed.
import ioredis, { type Redis } from 'ioredis';

const { Command } = ioredis;
import type { ScriptName } from './script-results.js';

/**
 * How many keys each script takes. `acquire` and `release` take a batch (see their contract blocks): the
 * number of keys follows from the batch size, so they have no fixed count.
 */
export const SCRIPT_KEY_COUNTS: { readonly [S in ScriptName]: number | 'batch' } = {
  acquire: 'batch',
  promise: 6,
  extend: 4,
  release: 'batch',
  inspect: 3,
  'repair-marker': 5,
  'repair-read': 5,
  'repair-read-slot': 5,
  'repair-raise': 'batch',
  'finish-repair': 5,
  fold: 3,
  'fold-slot': 'batch',
  'fresh-init': 5,
  // Its keys span many slots, which Redis Cluster refuses to have declared: they are passed in ARGV.
  'fresh-init-shard': 0,
  'probe-shard': 0,
  settings: 2,
};

export const SCRIPT_NAMES = Object.keys(SCRIPT_KEY_COUNTS) as ScriptName[];

/** `lua/` sits next to both `src/` and `dist/`, two levels above this file in either. */
export function scriptUrl(name: ScriptName): URL {
  return new URL(`../../lua/${name}.lua`, import.meta.url);
}

const INCLUDE = /^-- @include ([a-z][a-z0-9-]*)$/gm;

/**
 * A script's source with each `-- @include NAME` line replaced by `lua/include/NAME.lua`: Redis scripts cannot
 * share code, so helpers such as the decimal token comparison live in one file and are inlined at load time. An
 * include names its own includes the same way; each file is inlined once per script, where it is first named (a
 * later line naming it again is dropped), so a helper is defined before the code that names it uses it.
 */
export function loadScriptSource(name: ScriptName): string {
  const inlined = new Set<string>();
  const expand = (source: string): string =>
    source.replace(INCLUDE, (_line, include: string) => {
      if (inlined.has(include)) return `-- (${include}: inlined above)`;
      inlined.add(include);
      return expand(
        readFileSync(new URL(`../../lua/include/${include}.lua`, import.meta.url), 'utf8').trimEnd(),
      );
    });
  return expand(readFileSync(scriptUrl(name), 'utf8'));
}

interface LoadedScript {
  readonly source: string;
  /** SHA1 of the source: the name EVALSHA runs it by once the node has it cached. */
  readonly sha: string;
}

let loaded: Map<ScriptName, LoadedScript> | undefined;

/** Every script's source (includes expanded) and SHA1, read once. */
function scripts(): ReadonlyMap<ScriptName, LoadedScript> {
  loaded ??= new Map(
    SCRIPT_NAMES.map((name) => {
      const source = loadScriptSource(name);
      return [name, { source, sha: createHash('sha1').update(source).digest('hex') }];
    }),
  );
  return loaded;
}

/** Loads in flight, per client: the coordinators sharing a client of yours share its load. */
const loading = new WeakMap<Redis, Promise<void>>();

/**
 * Connections that hold every script, by their socket: ioredis opens a new socket for every (re)connection, so a
 * connection that is new, or came back (a server that restarted lost its cache), is not in here and loads again.
 */
const loadedOn = new WeakSet<object>();

/** The part of the client's socket a load uses: writes between cork() and uncork() leave in one go. */
interface Socket {
  cork(): void;
  uncork(): void;
}

/** The client's socket while it is ready (commands written now run in the order written), else undefined. */
function readySocket(client: Redis): Socket | undefined {
  const { status, stream } = client as unknown as { status?: unknown; stream?: Partial<Socket> };
  return status === 'ready' && typeof stream?.cork === 'function' && typeof stream.uncork === 'function'
    ? (stream as Socket)
    : undefined;
}

/**
 * Loads every script into a node's script cache (SCRIPT LOAD), in one write on the connection. `NodeConnection`
 * does this whenever its connection becomes ready, before any script call can be written behind it.
 *
 * Sent once per connection, not once per caller:
 * - A call while a load is in flight on the same client joins it instead of sending the scripts again: that load's
 *   commands were written before this call, so every script call written after it still runs behind them, as with a
 *   load of its own (the node answers commands of one connection in order). Ten Redlocks made over one client at
 *   once load the scripts once, not ten times.
 * - A call on a connection that already loaded them returns at once: the node keeps its script cache until it
 *   restarts (which closes the connection; the next one is new and loads) or someone runs SCRIPT FLUSH, which shows
 *   as NOSCRIPT on the next call and reloads with `force` (NodeConnection.runScript). Redlocks made one after another
 *   over your clients load nothing after the first.
 */
export function loadScripts(client: Redis, options: { readonly force?: boolean } = {}): Promise<void> {
  const force = options.force === true;
  const inFlight = loading.get(client);
  // A forced load follows a NOSCRIPT: a load in flight may have run before the flush, so it sends its own.
  if (inFlight !== undefined && !force) return inFlight;
  const socket = readySocket(client);
  if (socket !== undefined && !force && loadedOn.has(socket)) return Promise.resolve();
  socket?.cork();
  const load = Promise.all(
    [...scripts().values()].map((script) => {
      const command = new Command('script', ['LOAD', script.source], { replyEncoding: 'utf8' });
      client.sendCommand(command);
      return command.promise;
    }),
  ).then(
    () => {
      if (loading.get(client) === load) loading.delete(client);
      if (socket !== undefined && readySocket(client) === socket) loadedOn.add(socket);
    },
    (error: unknown) => {
      if (loading.get(client) === load) loading.delete(client);
      throw error;
    },
  );
  socket?.uncork();
  loading.set(client, load);
  return load;
}

/** The node does not have the script cached (it restarted, or someone ran SCRIPT FLUSH). */
export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * One EVALSHA as the bytes ioredis would write for it: `new Command('evalsha', argv).toWritable()` (a RESP array of
 * bulk strings, each argument's length in UTF-8 bytes), UTF-8 encoded once into a Buffer. The socket write that
 * follows copies nothing and converts nothing, so a buffer written to five sockets is converted once, not five
 * times (test/unit/coordinator/scripts/encoded-command.test.ts compares the bytes with ioredis' own).
 */
export function encodeCommand(name: string, argv: readonly string[]): Buffer {
  let text = `*${argv.length + 1}\r\n$${Buffer.byteLength(name)}\r\n${name}\r\n`;
  for (const arg of argv) text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return Buffer.from(text, 'utf8');
}

/**
 * An ioredis command whose bytes were encoded before it was made ({@link encodeCommand}): ioredis queues it, times
 * it and hands it its reply as any other command (its own promise, its own reply, its own failure); only
 * `toWritable` returns the bytes given instead of encoding `args` again. `args` is the arguments those bytes
 * encode, for what ioredis shows of a command (debug output, tracing) and never changed: set after the constructor,
 * which would otherwise copy and stringify them. For standalone clients only: an ioredis Cluster client routes a
 * command by the keys it finds in `args` and is given plain commands (`runScript`).
 */
class EncodedCommand extends Command {
  constructor(
    name: string,
    argv: string[],
    private readonly encoded: Buffer,
  ) {
    super(name, [], { replyEncoding: 'utf8' });
    this.args = argv;
  }

  override toWritable(): Buffer {
    return this.encoded;
  }
}

/** One script call as encoded last: what it was made from, and its bytes. */
interface EncodedCall {
  readonly sha: string;
  readonly keyCount: number;
  /** The arguments as given (numbers not yet strings), compared with the next call's. */
  readonly args: readonly (string | number)[];
  /** `[sha, key count, ...keys, ...args]`, all strings: what `bytes` encodes. */
  readonly argv: string[];
  readonly bytes: Buffer;
}

/**
 * The scripts a caller sends with the same keys and arguments to every node, one node after the other in the same
 * event-loop turn: a batch of acquires or releases (each node's `ScriptBatcher` flushes in turn), an extend, a
 * promise round. Their last encoding is kept and reused by the next call when its keys and arguments are equal,
 * element by element, so the five nodes' copies of one batch are encoded once.
 */
const SHARED_ENCODING: ReadonlySet<ScriptName> = new Set<ScriptName>([
  'acquire',
  'release',
  'extend',
  'promise',
]);

/** Per script of SHARED_ENCODING, the call encoded last (in this process, for any client). */
const lastEncoded = new Map<ScriptName, EncodedCall>();

/** Whether `call` encodes exactly these keys and arguments: every element compared, nothing assumed. */
function encodes(
  call: EncodedCall,
  sha: string,
  keys: readonly string[],
  args: readonly (string | number)[],
): boolean {
  if (call.sha !== sha || call.keyCount !== keys.length || call.args.length !== args.length) return false;
  const { argv } = call;
  for (let i = 0; i < keys.length; i++) if (argv[i + 2] !== keys[i]) return false;
  for (let i = 0; i < args.length; i++) if (call.args[i] !== args[i]) return false;
  return true;
}

/** The bytes of EVALSHA `sha` with these keys and arguments, reusing the last encoding of `name` when it is equal. */
function encodedCall(
  name: ScriptName,
  sha: string,
  keys: readonly string[],
  args: readonly (string | number)[],
): EncodedCall {
  const shared = SHARED_ENCODING.has(name);
  const last = shared ? lastEncoded.get(name) : undefined;
  if (last !== undefined && encodes(last, sha, keys, args)) return last;
  const argv: string[] = [sha, String(keys.length)];
  for (const key of keys) argv.push(key);
  for (const arg of args) argv.push(String(arg));
  const call: EncodedCall = {
    sha,
    keyCount: keys.length,
    args: args.slice(),
    argv,
    bytes: encodeCommand('evalsha', argv),
  };
  if (shared) lastEncoded.set(name, call);
  return call;
}

/** Whether `client` is an ioredis Cluster client (of any copy of ioredis 4.28+ or 5). */
function isCluster(client: Redis): boolean {
  return (client as unknown as { isCluster?: unknown }).isCluster === true;
}

/**
 * Runs a script by its SHA1 (EVALSHA). The reply is raw and must go through `interpretReply` (or
 * `splitBatchReply` for the batch scripts).
 *
 * There is deliberately no EVAL fallback on NOSCRIPT: the fallback would run this call a round trip late, after
 * calls sent behind it on the same connection — a release could then overtake the acquire it undoes and leave
 * the acquire's key behind. A NOSCRIPT fails the call (a vote against, a release retried later) and the caller
 * reloads the scripts (`loadScripts`), which a fresh connection does before its first call anyway.
 *
 * The command goes to the connection directly (`sendCommand`), past ioredis' auto-pipelining: the coordinator
 * batches its calls itself, and an auto-pipeline keeps only one pipeline in flight per connection, so every
 * batch would wait for the previous one's replies. Commands leave in call order on each connection.
 *
 * To a standalone node the command goes encoded once per distinct call ({@link encodedCall}): the same batch sent
 * to five nodes is one encoding written to five sockets, and a node whose keys or arguments differ (its own seal
 * epoch, a batch of other calls) gets an encoding of its own. Each node's command is still its own: its reply, its
 * failure, its place in its connection's queue.
 */
export function runScript(
  client: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const expected = SCRIPT_KEY_COUNTS[name];
  if (expected === 'batch' ? keys.length === 0 : keys.length !== expected) {
    return Promise.reject(
      new Error(`${name} takes ${expected === 'batch' ? 'at least one' : expected} keys, got ${keys.length}`),
    );
  }
  const sha = scripts().get(name)!.sha;
  let command: InstanceType<typeof Command>;
  if (isCluster(client)) {
    const argv: (string | number)[] = [sha, keys.length];
    for (const key of keys) argv.push(key);
    for (const arg of args) argv.push(arg);
    command = new Command('evalsha', argv, { replyEncoding: 'utf8' });
  } else {
    const call = encodedCall(name, sha, keys, args);
    command = new EncodedCommand('evalsha', call.argv, call.bytes);
  }
  client.sendCommand(command);
  return command.promise;
}
