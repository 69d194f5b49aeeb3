// `npm run lint:openapi` (part of `npm run lint`): the service's OpenAPI document, as GET /openapi.json serves
// it in each of its shapes (authentication on with public or protected health endpoints, authentication off),
// linted by Redocly CLI (its `recommended` rules) and by Spectral (the `spectral:oas` ruleset). Any error or
// warning from either fails, with the tool's own report.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSchemas } from '../packages/service/src/http/schemas.js';
import { createOpenApiDocument } from '../packages/service/src/http/openapi.js';
import { DEFAULT_APP_OPTIONS } from '../packages/service/src/service-options.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = (name: string): string => join(root, 'node_modules/.bin', name);

const SHAPES = [
  { name: 'auth on, health public', authEnabled: true, healthAuthRequired: false },
  { name: 'auth on, health protected', authEnabled: true, healthAuthRequired: true },
  { name: 'auth off', authEnabled: false, healthAuthRequired: false },
] as const;

const scratch = mkdtempSync(join(tmpdir(), 'fenced-openapi-'));
const failures: string[] = [];
try {
  const ruleset = join(scratch, '.spectral.yaml');
  writeFileSync(ruleset, 'extends: ["spectral:oas"]\n');
  const redoclyConfig = join(scratch, 'redocly.yaml');
  writeFileSync(redoclyConfig, 'extends:\n  - recommended\n');
  for (const shape of SHAPES) {
    const document = createOpenApiDocument(createSchemas(DEFAULT_APP_OPTIONS), {
      ...shape,
      version: '0.0.0',
    });
    const file = join(scratch, `openapi-${shape.name.replace(/\W+/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(document, null, 2));

    const redocly = spawnSync(
      bin('redocly'),
      ['lint', file, '--config', redoclyConfig, '--format', 'stylish', '--max-problems', '1000'],
      {
        encoding: 'utf8',
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      },
    );
    const redoclyOutput = `${redocly.stdout}${redocly.stderr}`;
    // Clean: exit 0 and Redocly's "valid" line, with no "You have N warnings" (it exits 0 on warnings alone).
    const redoclyClean =
      redocly.status === 0 && /Woohoo!/.test(redoclyOutput) && !/You have \d+ warnings?/.test(redoclyOutput);
    report(`Redocly (${shape.name})`, redoclyClean, redoclyOutput);

    const spectral = spawnSync(
      bin('spectral'),
      ['lint', file, '--ruleset', ruleset, '--fail-severity', 'hint', '--format', 'stylish'],
      { encoding: 'utf8' },
    );
    report(`Spectral (${shape.name})`, spectral.status === 0, `${spectral.stdout}${spectral.stderr}`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

function report(name: string, clean: boolean, output: string): void {
  if (clean) {
    console.log(`  ✓ ${name}: 0 errors, 0 warnings`);
  } else {
    failures.push(name);
    console.error(`  ✗ ${name}:\n${output}`);
  }
}

if (failures.length > 0) {
  console.error(`\nthe OpenAPI document is not lint-clean: ${failures.join('; ')}`);
  process.exit(1);
}
