// The example service as a process: environment → config, migrations, listen, graceful stop. The only file of
// the example that touches process.env, ports and signals.
//   FENCED_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres PORT=3000 \
//     node packages/guarded-store/dist/example/server.js
import type { Server } from 'node:http';
import { pino } from 'pino';
import { createDatabase } from '../db/create-database.js';
import { GuardedStore } from '../guarded-store.js';
import { createExampleApp } from './create-example-app.js';
import { loadExampleConfig } from './example-config.js';
import { migrateExample, type ExampleDatabase } from './example-database.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadExampleConfig(process.env);
  } catch (error) {
    console.error(`example server: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  }
  const logger = pino({ level: config.logLevel, name: 'fenced-example' });
  const db = createDatabase<ExampleDatabase>({
    connectionString: config.databaseUrl,
    applicationName: 'fenced-example',
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });
  const store = new GuardedStore(db, { schema: config.schema });
  await store.migrate();
  await migrateExample(db, { schema: config.schema });
  const app = createExampleApp({ store, protection: config.protection, logger });
  const server: Server = app.listen(config.port, () => {
    logger.info({ port: config.port, schema: config.schema, protection: config.protection }, 'listening');
  });
  const stop = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'stopping');
    server.close(() => {
      db.destroy().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error('example server failed to start:', error);
  process.exit(1);
});
