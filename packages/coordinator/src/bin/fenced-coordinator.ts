#!/usr/bin/env node
// The `fenced-coordinator` command (`npx fenced-coordinator`, the Docker image). The one module of the package
// with a top-level await: nothing imports it, so `require()` of every entry keeps working.
// The operator commands (cli/) need the library only. `serve` (the default without a command) runs the HTTP
// service, which is its own package, @fenced/service (fastify, pino, prom-client, zod): a library-only install
// has none of it, so it is loaded only to serve, and when it is missing the command says how to install it.
import { runCli } from '../cli/run-cli.js';
import { serveCommand } from '../cli/serve-command.js';

const outcome = await runCli(process.argv.slice(2));
if (outcome === 'serve') {
  const code = await serveCommand();
  if (code !== undefined) process.exitCode = code;
} else {
  process.exitCode = outcome;
}
