// Renders a results file as the Markdown tables of the benchmark pages, e.g. for a supplementary run:
//   node --conditions=@fenced/source --import tsx bench/suite/render.ts bench/results/scale-1m.json --section scale-1m
// prints the tables, and with --section writes them between that section's markers, with the SVG charts
// (bench/suite/charts.ts), which it writes beside the results file: into docs/benchmarks.md or
// docs/benchmark-experiments.md, whichever holds the markers (a new section goes to the end of the experiment log).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as prettier from 'prettier';
import type { BenchResults } from './results.js';
import { chartLinks, writeCharts } from './charts.js';
import { docHolding, renderMarkdown, writeDocTables } from './report.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { section: { type: 'string' } },
  allowPositionals: true,
});
const file = positionals[0];
if (file === undefined) {
  process.stderr.write('usage: bench/suite/render.ts RESULTS.json [--section NAME]\n');
  process.exit(2);
}
const results = JSON.parse(await fs.readFile(path.resolve(file), 'utf8')) as BenchResults;
const charts = values.section === undefined ? [] : await writeCharts(results, path.resolve(file));
const markdown = renderMarkdown(results, chartLinks(charts, path.join(ROOT, 'docs')));
process.stdout.write(`${markdown}\n`);
if (values.section !== undefined) {
  const doc = await docHolding(ROOT, values.section);
  await writeDocTables(doc, markdown, values.section);
  const config = (await prettier.resolveConfig(doc)) ?? {};
  await fs.writeFile(
    doc,
    await prettier.format(await fs.readFile(doc, 'utf8'), { ...config, filepath: doc }),
  );
}
