import { ExitCode, PROCESS_OUTPUT, type CommandOutput } from './command-line.js';

/**
 * The package that serves, in a variable so that TypeScript does not make the coordinator depend on it: the HTTP
 * service (fastify, pino, prom-client, zod) is `@fenced/service`, which depends on this package, not the reverse.
 * A library-only install of `@fenced/coordinator` has none of it; `fenced-coordinator serve` loads it when run.
 */
export const SERVICE_PACKAGE = '@fenced/service';

/** The slice of `@fenced/service` that `serve` needs. */
export interface ServiceModule {
  /** Reads the environment, starts the service, handles signals; sets `process.exitCode` on a failed start. */
  main(): Promise<void>;
}

/** What `serve` says when `@fenced/service` is not installed. */
export const SERVICE_MISSING = `fenced-coordinator serve: the HTTP service is the package ${SERVICE_PACKAGE}, which is not installed here.
Install it next to @fenced/coordinator (npm install ${SERVICE_PACKAGE}) and run fenced-coordinator serve again.
fenced is not on the npm registry yet: in a clone of its repository, npm run pack writes the tarball
(tarballs/fenced-service-<version>.tgz); npm install that file.
The operator commands (status, inspect, repair, keygen) need only @fenced/coordinator.`;

/** Whether `error` says that `specifier` itself (not one of its dependencies) cannot be found. */
function isMissing(error: unknown, specifier: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : '';
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    (message.includes(`'${specifier}'`) || message.includes(`"${specifier}"`))
  );
}

/**
 * Runs the HTTP service (`@fenced/service`'s `main`). Resolves to `ExitCode.USAGE` when the package is not
 * installed (said on `output`, with how to install it), and to `undefined` once the service runs (it sets
 * `process.exitCode` itself when it fails to start).
 * @throws whatever loading an installed `@fenced/service` throws (a missing dependency of it, a syntax error)
 */
export async function serveCommand(
  load: (specifier: string) => Promise<unknown> = (specifier) => import(specifier),
  output: CommandOutput = PROCESS_OUTPUT,
): Promise<number | undefined> {
  let loaded: unknown;
  try {
    loaded = await load(SERVICE_PACKAGE);
  } catch (error) {
    if (!isMissing(error, SERVICE_PACKAGE)) throw error;
    output.err(SERVICE_MISSING);
    return ExitCode.USAGE;
  }
  const service = loaded as Partial<ServiceModule>;
  if (typeof service.main !== 'function') {
    output.err(
      `fenced-coordinator serve: ${SERVICE_PACKAGE} is installed but has no main(): a version too old`,
    );
    return ExitCode.USAGE;
  }
  await service.main();
  return undefined;
}
