/**
 * Mutated scripts for the simulation's negative controls: the coordinator's own script source (includes expanded,
 * as the coordinator loads it) with one piece replaced. A mutant whose pattern no longer appears fails at once, so a
 * negative control cannot silently turn into a run of the unmutated script.
 */
import type { ScriptName } from '../../../packages/coordinator/src/scripts/script-results.js';
import { coordinatorScript } from '../lua-redis/lua-redis.js';

export function mutatedScript(name: ScriptName, from: string, to: string): string {
  const source = coordinatorScript(name).source;
  const at = source.indexOf(from);
  if (at === -1 || source.indexOf(from, at + 1) !== -1) {
    throw new Error(
      `mutant of ${name}.lua: the text to replace does not appear exactly once: ${JSON.stringify(from)}`,
    );
  }
  return source.slice(0, at) + to + source.slice(at + from.length);
}
