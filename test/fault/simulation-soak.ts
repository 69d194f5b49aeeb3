// The protocol simulation, run for as long as asked (`npm run soak -- --simulation --minutes 10`): seeded random
// schedules of the real acquire, token rounds and repair against in-memory nodes running the project's own Lua
// scripts (test/fixtures/protocol-sim/), about 20 times slower per schedule than on the former TypeScript model. A
// failure prints its seed; replay it with
// `SIM_SEED=<seed> npx vitest run test/unit/coordinator/protocol/protocol-simulation.test.ts`. The nemesis search
// (faults cutting between any two steps, G2 over the whole history) is `npm run sim` (docs/simulation.md).
import { randomChooser } from '../fixtures/protocol-sim/explore.js';
import { randomSpec } from '../fixtures/protocol-sim/random-spec.js';
import { runScenario } from '../fixtures/protocol-sim/scenario.js';

export async function soakSimulation(options: {
  firstSeed: number;
  minutes: number | undefined;
}): Promise<number> {
  const deadline = performance.now() + (options.minutes ?? 1) * 60_000;
  let runs = 0;
  let grants = 0;
  for (let seed = options.firstSeed; performance.now() < deadline; seed++) {
    const result = await runScenario(randomSpec(seed), randomChooser(seed));
    runs++;
    grants += result.grants.length;
    if (result.violation !== null) {
      console.error(`seed ${seed}: ${result.violation}`);
      const replay = await runScenario(randomSpec(seed), randomChooser(seed), { log: true });
      console.error(replay.log.join('\n'));
      return 1;
    }
    if (runs % 1_000 === 0) console.log(`simulation: ${runs} schedules, ${grants} grants, no G2 violation`);
  }
  console.log(
    `simulation: ${runs} schedules from seed ${options.firstSeed}, ${grants} grants, no G2 violation`,
  );
  return 0;
}
