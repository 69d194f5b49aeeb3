// `npm run demo`: the GC-pause and clock scenarios of issue 5, with real processes. See `--help`.
import { pathToFileURL } from 'node:url';
import { HELP, UsageError, parseCliArgs, scenarioList } from './cli-args.js';
import { runDemo } from './run-demo.js';
import { colourWanted } from './terminal-report.js';

const controller = new AbortController();
let interrupted = false;

function onSignal(signal: NodeJS.Signals): void {
  if (interrupted) process.exit(130); // a second Ctrl-C: leave now (children are still killed on exit)
  interrupted = true;
  console.error(`\n${signal}: stopping everything the demo started …`);
  controller.abort(new Error(`interrupted by ${signal}`));
}

/**
 * Ctrl-C must stop things in order: drop the demo's schema, stop a Postgres cluster it started. The
 * @fenced/test-utils process registry defers to a program's own SIGINT/SIGTERM handler, and its exit hook, which
 * kills any child still running by pid, stays in place as the last resort.
 */
function takeOverSignals(): void {
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

async function main(): Promise<number> {
  let command;
  try {
    command = parseCliArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`demo: ${error.message}\nTry 'npm run demo -- --help'.`);
    return 2;
  }
  if (command.kind === 'help') {
    console.log(HELP);
    return 0;
  }
  if (command.kind === 'list') {
    console.log(scenarioList());
    return 0;
  }
  takeOverSignals();
  try {
    const result = await runDemo({
      scenarios: command.scenarios,
      print: (line) => console.log(line),
      colour: colourWanted(process.stdout),
      signal: controller.signal,
    });
    if (interrupted) return 130;
    if (result.reportPath) {
      console.log(`\n   HTML report: ${result.reportPath}`);
      console.log(`   open it with: ${pathToFileURL(result.reportPath).href}`);
    }
    return result.passed ? 0 : 1;
  } catch (error) {
    if (interrupted) return 130;
    console.error(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
