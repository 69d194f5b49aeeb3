// `npm run keygen -- [--id <keyId>] [--out <dir>]`: makes an Ed25519 key pair for signed fencing tokens
// (DESIGN §4b). The coordinator gets the private key (FENCED_SIGNING_KEY_FILE + FENCED_SIGNING_KEY_ID); guarded
// stores get the public key (`verifyKeys: { [keyId]: publicKeyPem }`).
//
// With --out, writes <dir>/<keyId>.private.pem (mode 0600, never overwritten) and <dir>/<keyId>.public.pem;
// without it, prints both PEMs to stdout (the private key then lives in your terminal: prefer --out).
import { generateKeyPairSync } from 'node:crypto';
import { chmod, mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { KEY_ID_PATTERN } from '@fenced/shared';

const USAGE = 'usage: npm run keygen -- [--id <keyId: 1-64 of A-Za-z0-9_->] [--out <directory>]';

async function writeNew(file: string, text: string, mode: number): Promise<void> {
  // 'wx' fails if the file exists: a key pair is never replaced by accident.
  const handle = await open(file, 'wx', mode);
  try {
    await handle.writeFile(text, 'utf8');
  } finally {
    await handle.close();
  }
  await chmod(file, mode); // whatever the umask was
}

async function main(): Promise<number> {
  let values: { id?: string; out?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: { id: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (error) {
    console.error(`keygen: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const id = values.id ?? `k${new Date().toISOString().slice(0, 10).replaceAll('-', '')}`;
  if (!KEY_ID_PATTERN.test(id)) {
    console.error(
      `keygen: --id must be 1 to 64 letters, digits, '-' or '_', got "${id.slice(0, 80)}"\n${USAGE}`,
    );
    return 2;
  }
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privatePem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const publicPem = publicKey.export({ format: 'pem', type: 'spki' }).toString();

  if (values.out === undefined) {
    console.error(
      'keygen: printing the private key to stdout; use --out <dir> to write it to a 0600 file instead',
    );
    console.log(
      `# key id: ${id}\n# private key (coordinator: FENCED_SIGNING_KEY, or save it as FENCED_SIGNING_KEY_FILE)`,
    );
    console.log(privatePem.trimEnd());
    console.log(`# public key (guarded stores: verifyKeys: { '${id}': <this PEM> })`);
    console.log(publicPem.trimEnd());
    return 0;
  }
  const dir = path.resolve(values.out);
  await mkdir(dir, { recursive: true });
  const privateFile = path.join(dir, `${id}.private.pem`);
  const publicFile = path.join(dir, `${id}.public.pem`);
  try {
    await writeNew(privateFile, privatePem, 0o600);
    await writeNew(publicFile, publicPem, 0o644);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    console.error(
      code === 'EEXIST'
        ? `keygen: a key named ${id} already exists in ${dir}; choose another --id`
        : `keygen: ${(error as Error).message}`,
    );
    return 1;
  }
  console.log(`key id:      ${id}`);
  console.log(`private key: ${privateFile} (mode 0600; the coordinator only)`);
  console.log(`public key:  ${publicFile}`);
  console.log('');
  console.log('coordinator service:');
  console.log(`  FENCED_SIGNING_KEY_ID=${id}`);
  console.log(`  FENCED_SIGNING_KEY_FILE=${privateFile}`);
  console.log('guarded stores:');
  console.log(`  new GuardedStore(db, { verifyKeys: { '${id}': readFileSync('${publicFile}', 'utf8') } })`);
  return 0;
}

process.exitCode = await main();
