#!/usr/bin/env node
// The `fenced-coordinator` command (`npm start`, `npx fenced-coordinator`, the Docker image). The one module
// of the package with a top-level await: nothing imports it, so `require()` of every entry keeps working.
// Without a command (or with `serve`) it runs the service exactly as before; the operator commands (cli/) load
// nothing of the HTTP stack, so the service's modules are imported only to serve.
import { runCli } from '../cli/run-cli.js';

const outcome = await runCli(process.argv.slice(2));
if (outcome === 'serve') {
  const { main } = await import('../service/server.js');
  await main();
} else {
  process.exitCode = outcome;
}
