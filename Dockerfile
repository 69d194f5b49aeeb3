# syntax=docker/dockerfile:1
# One image for the coordinator service (@fenced/service, run by @fenced/coordinator's `fenced-coordinator`
# command) and the guarded-store example app (DESIGN §6):
#   docker build -t fenced .
#   docker run --rm -e FENCED_REDIS_URLS=redis://... -e FENCED_API_KEYS=$(openssl rand -hex 24) -p 8080:8080 fenced
# (FENCED_HOST=0.0.0.0 is not loopback: without API keys the service refuses to start unless FENCED_AUTH=off.)
# The build stage compiles the workspaces with the project's own lockfile; the runtime stage keeps only the
# compiled packages, the Lua scripts and SQL migrations, and the production dependencies.

ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
# Manifests first, so the dependency layer is cached until they change.
COPY package.json package-lock.json ./
COPY packages/shared/package.json packages/shared/
COPY packages/coordinator/package.json packages/coordinator/
COPY packages/service/package.json packages/service/
COPY packages/guarded-store/package.json packages/guarded-store/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.base.json ./
COPY packages/ packages/
RUN npx tsc -b \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
# node_modules/@fenced/* are workspace symlinks into packages/: copied as links, resolved below.
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/packages/shared/package.json packages/shared/
COPY --from=build /app/packages/shared/dist/ packages/shared/dist/
COPY --from=build /app/packages/coordinator/package.json packages/coordinator/
COPY --from=build /app/packages/coordinator/dist/ packages/coordinator/dist/
COPY --from=build /app/packages/coordinator/lua/ packages/coordinator/lua/
# The HTTP service (fastify, pino, prom-client, zod) is its own package; `fenced-coordinator serve` loads it.
COPY --from=build /app/packages/service/package.json packages/service/
COPY --from=build /app/packages/service/dist/ packages/service/dist/
COPY --from=build /app/packages/guarded-store/package.json packages/guarded-store/
COPY --from=build /app/packages/guarded-store/dist/ packages/guarded-store/dist/
COPY --from=build /app/packages/guarded-store/migrations/ packages/guarded-store/migrations/
USER node
ENV FENCED_HOST=0.0.0.0 \
    FENCED_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.FENCED_PORT||process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM goes straight to node (exec form, no shell): the server drains in-flight requests and exits.
CMD ["node", "packages/coordinator/dist/bin/fenced-coordinator.js"]
