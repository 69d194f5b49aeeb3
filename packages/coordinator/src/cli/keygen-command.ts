import {
  defaultKeyId,
  generateSigningKeyPair,
  KeyExistsError,
  writeSigningKeyPair,
} from '../signing/signing-key-pair.js';
import { ExitCode, parseCommandLine, toJson, type CommandContext } from './command-line.js';
import { UsageError } from './usage-error.js';

export const KEYGEN_USAGE = `usage: fenced-coordinator keygen (--out <dir> | --stdout) [--id <keyId>] [--json]

Makes an Ed25519 key pair for signed leases (DESIGN §4b): the coordinator gets the private key
(FENCED_SIGNING_KEY_ID + FENCED_SIGNING_KEY_FILE), guarded stores the public key (verifyKeys).
The private key is written only where you ask: a 0600 file, or stdout.

  --out <dir>      write <dir>/<keyId>.private.pem (mode 0600) and <dir>/<keyId>.public.pem; never overwrites
  --stdout         print both PEMs to stdout instead (the private key then sits in your terminal or pipe)
  --id <keyId>     1 to 64 of A-Z a-z 0-9 _ - (default k<today's date>, e.g. ${defaultKeyId()})
  --json           one JSON object: { keyId, privateKeyFile, publicKeyFile, publicKeyPem }; with --stdout,
                   { keyId, privateKeyPem, publicKeyPem }
  -h, --help       this text`;

/** `fenced-coordinator keygen`. */
export async function keygenCommand(context: CommandContext): Promise<number> {
  const { values } = parseCommandLine(
    'keygen',
    context.argv,
    {
      id: { type: 'string' },
      out: { type: 'string' },
      stdout: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 0, names: '' },
  );
  if (values.help === true) {
    context.output.out(KEYGEN_USAGE);
    return ExitCode.OK;
  }
  const toStdout = values.stdout === true;
  if (toStdout === (values.out !== undefined)) {
    throw new UsageError(
      toStdout
        ? 'give --out <dir> or --stdout, not both'
        : 'say where the private key goes: --out <dir> (a 0600 file) or --stdout (printed), got neither',
      'keygen',
    );
  }
  if (values.out !== undefined && values.out.trim() === '') {
    throw new UsageError('--out needs a directory, got an empty string', 'keygen');
  }
  const id = values.id ?? defaultKeyId();
  let pair;
  try {
    pair = generateSigningKeyPair(id);
  } catch (error) {
    throw new UsageError(`--id: ${(error as Error).message}`, 'keygen');
  }
  const { output } = context;
  if (toStdout) {
    if (values.json === true) {
      output.out(toJson({ keyId: id, privateKeyPem: pair.privateKeyPem, publicKeyPem: pair.publicKeyPem }));
    } else {
      output.out(`# key id: ${id}`);
      output.out('# private key (coordinator: FENCED_SIGNING_KEY, or save it as FENCED_SIGNING_KEY_FILE)');
      output.out(pair.privateKeyPem.trimEnd());
      output.out(`# public key (guarded stores: verifyKeys: { '${id}': <this PEM> })`);
      output.out(pair.publicKeyPem.trimEnd());
    }
    return ExitCode.OK;
  }
  let files;
  try {
    files = await writeSigningKeyPair(values.out!, pair);
  } catch (error) {
    if (error instanceof KeyExistsError) {
      output.err(`fenced-coordinator keygen: ${error.message} (--id)`);
      return ExitCode.FAILED;
    }
    throw error;
  }
  if (values.json === true) {
    output.out(toJson({ keyId: id, ...files, publicKeyPem: pair.publicKeyPem }));
    return ExitCode.OK;
  }
  output.out(`key id:      ${id}`);
  output.out(`private key: ${files.privateKeyFile} (mode 0600; the coordinator only)`);
  output.out(`public key:  ${files.publicKeyFile}`);
  output.out('');
  output.out('coordinator service:');
  output.out(`  FENCED_SIGNING_KEY_ID=${id}`);
  output.out(`  FENCED_SIGNING_KEY_FILE=${files.privateKeyFile}`);
  output.out('guarded stores:');
  output.out(
    `  new GuardedStore(db, { verifyKeys: { '${id}': readFileSync('${files.publicKeyFile}', 'utf8') } })`,
  );
  return ExitCode.OK;
}
