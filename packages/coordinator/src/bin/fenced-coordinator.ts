#!/usr/bin/env node
// The `fenced-coordinator` command (`npm start`, `npx fenced-coordinator`, the Docker image). The one module
// of the package with a top-level await: nothing imports it, so `require()` of every entry keeps working.
import { main } from '../server.js';

await main();
