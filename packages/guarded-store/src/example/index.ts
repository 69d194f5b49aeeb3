export { createExampleApp } from './create-example-app.js';
export type {
  ExampleAppOptions,
  ExampleProtection,
  DocumentView,
  AccountView,
} from './create-example-app.js';
export { migrateExample } from './example-database.js';
export type { ExampleDatabase, ExampleDocumentTable, ExampleAccountTable } from './example-database.js';
export { loadExampleConfig } from './example-config.js';
export type { ExampleConfig } from './example-config.js';
