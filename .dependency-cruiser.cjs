// The architecture as rules (`npm run lint` runs `npm run lint:imports`, which runs this): no import circles in
// any package; inside @fenced/coordinator no import runs back up the wings' layers; and the "nevers" between
// entry points and packages. A rule that is broken fails the lint with the importing and the imported file.
//
// @fenced/coordinator's layers, lowest first: a file may import from its own layer and the ones below, never above.
const COORDINATOR = '^packages/coordinator/src/';
const LAYERS = [
  ['errors\\.ts', 'keys/', 'quorum/', 'signing/'],
  ['options\\.ts'],
  ['scripts/'],
  ['nodes/'],
  ['tokens/', 'lease/'],
  ['protocol/', 'events/'],
  ['coordinator\\.ts'],
  ['index\\.ts', 'client/', 'cli/', 'bin/'],
];
const inLayers = (layers) => `${COORDINATOR}(${layers.flat().join('|')})`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle: the files of one depend on each other, so none can be read or moved alone.',
      from: { path: '^packages/' },
      to: { circular: true },
    },
    ...LAYERS.slice(0, -1).map((layer, i) => ({
      name: `coordinator-layer-${i}-imports-up`,
      severity: 'error',
      comment: `${layer.join(', ')} must not import from a higher layer (${LAYERS.slice(i + 1)
        .flat()
        .join(', ')}).`,
      from: { path: inLayers([layer]) },
      to: { path: inLayers(LAYERS.slice(i + 1)) },
    })),
    {
      name: 'cluster-wing-reached-past-the-node-layer',
      severity: 'error',
      comment:
        'A Cluster member is a way of reaching a node: only the node layer (nodes/) knows the Cluster wing (nodes/cluster/); every level above talks to a NodeConnection.',
      from: { path: COORDINATOR, pathNot: `${COORDINATOR}nodes/` },
      to: { path: `${COORDINATOR}nodes/cluster/` },
    },
    {
      name: 'library-entry-reaches-service',
      severity: 'error',
      comment:
        'The library entry (@fenced/coordinator) never loads the service, its HTTP stack or the HTTP client: a library user installs and loads none of it.',
      from: { path: `${COORDINATOR}index\\.ts$` },
      to: {
        path: [
          `${COORDINATOR}(cli|client|bin)/`,
          '^packages/service/',
          'node_modules/@fenced/service/',
          'node_modules/(fastify|@fastify|pino|prom-client|zod)/',
        ],
        reachable: true,
      },
    },
    {
      name: 'http-client-reaches-node-layer',
      severity: 'error',
      comment:
        'The HTTP client (@fenced/coordinator/client) never reaches ioredis or the node layer: it talks to the service over HTTP only.',
      from: { path: `${COORDINATOR}client/index\\.ts$` },
      to: {
        path: [
          `${COORDINATOR}(nodes|scripts|tokens|protocol|cli)/`,
          '^packages/service/',
          `${COORDINATOR}(coordinator|options|errors)\\.ts$`,
          'node_modules/ioredis/',
        ],
        reachable: true,
      },
    },
    {
      name: 'coordinator-imports-service',
      severity: 'error',
      comment:
        '@fenced/service depends on @fenced/coordinator, never the reverse: the library installs without the HTTP stack (fastify, pino, prom-client, zod). `fenced-coordinator serve` loads the service by a name held in a variable (cli/serve-command.ts), at run time only.',
      from: { path: COORDINATOR },
      to: {
        path: [
          '^packages/service/',
          'node_modules/@fenced/service/',
          'node_modules/(fastify|@fastify|pino|prom-client|zod)/',
        ],
      },
    },
    {
      name: 'service-reaches-coordinator-internals',
      severity: 'error',
      comment:
        '@fenced/service uses @fenced/coordinator and @fenced/shared through their public entries only (package imports, never a path into their src/): what it needs is exported there.',
      from: { path: '^packages/service/src/' },
      to: {
        path: '^packages/(coordinator|shared|guarded-store|redlock)/src/(?!(index|client/index)\\.ts$)',
      },
    },
    {
      name: 'service-imports-relative-outside',
      severity: 'error',
      comment:
        '@fenced/service reaches other packages by their names (@fenced/coordinator), not by relative paths.',
      from: { path: '^packages/service/src/' },
      to: { path: '^packages/(?!service/)', dependencyTypesNot: ['aliased-workspace'] },
    },
    {
      name: 'shared-imports-ours',
      severity: 'error',
      comment: '@fenced/shared holds the protocol types every package uses; it imports nothing of ours.',
      from: { path: '^packages/shared/src/' },
      to: { path: ['^packages/(?!shared/)', 'node_modules/@fenced/'] },
    },
    {
      name: 'guard-entry-reaches-optional-peers',
      severity: 'error',
      comment:
        "The guarded store's main entry loads none of its optional peers (Drizzle, Prisma, fastify, express) nor the adapters' entries: each adapter is its own subpath (@fenced/guarded-store/pg, /drizzle, /prisma, /express, /fastify), loaded only by who imports it.",
      from: { path: '^packages/guarded-store/src/index\\.ts$' },
      to: {
        path: [
          'node_modules/(drizzle-orm|@prisma|prisma|fastify|@fastify|express|@types/express)/',
          '^packages/guarded-store/src/(pg|drizzle|prisma|fastify|express)\\.ts$',
        ],
        reachable: true,
      },
    },
    {
      name: 'guard-reaches-coordinator',
      severity: 'error',
      comment:
        'The guarded store never depends on the coordinator: it trusts tokens (and proofs), not the lock service that made them.',
      from: { path: '^packages/guarded-store/src/' },
      to: { path: ['^packages/coordinator/', 'node_modules/@fenced/coordinator/', 'node_modules/ioredis/'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)dist/' },
    tsPreCompilationDeps: true,
    combinedDependencies: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['@fenced/source', 'import', 'require', 'node', 'default'],
    },
  },
};
