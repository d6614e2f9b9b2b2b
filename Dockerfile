# The service's container image. `npm run image` builds it as petstore-orders:<version> and :latest;
# by hand: `docker build -t petstore-orders .` (podman: add `--format docker`, or HEALTHCHECK is
# dropped). Three stages on one Node.js base: `deps` installs the production dependencies, `build`
# compiles the TypeScript, and the image itself holds only those two results, runs as a user of its
# own under tini, and keeps its SQLite database in a volume. Deploying it: docs/deploy.md.
#
# The image itself starts from Debian's slim image with the node binary of the Node.js image copied
# in: npm, yarn and corepack (~25 MB), which only a build needs, stay out of it.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${NODE_IMAGE} AS node-base

FROM node-base AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY packages/client/package.json packages/client/
# Production dependencies only, exactly as locked, no install scripts (none is needed: better-sqlite3
# ships its compiled binary), no npm cache left behind. Then what nothing at run time reads: source
# maps and type declarations, OpenTelemetry's third build (build/esnext, for bundlers: Node loads
# build/esm and build/src), and better-sqlite3's binaries for other systems and the SQLite sources
# it ships to build from.
RUN npm ci --omit=dev --workspaces=false --ignore-scripts --no-audit --no-fund \
 && rm -rf /root/.npm \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete \
 && find node_modules/@opentelemetry -type d -path '*/build/esnext' -prune -exec rm -rf {} + \
 && cd node_modules/better-sqlite3 \
 && rm -rf deps src binding.gyp \
 && find prebuilds -type f ! -name "linux-$(node -p 'process.arch').node" -delete

FROM node-base AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY packages/client/package.json packages/client/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY packages/client/tsconfig.json packages/client/
COPY packages/client/src packages/client/src
COPY src src
# The compiled code without its source maps, declarations and build info, which nothing here reads.
RUN npm run build \
 && find dist \( -name '*.map' -o -name '*.d.ts' -o -name '.tsbuildinfo' \) -delete

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
ARG SOURCE_URL=unknown
LABEL org.opencontainers.image.title="Petstore Orders" \
      org.opencontainers.image.description="Pet store orders HTTP API (v1 and v2), with an order event feed and signed webhooks, on SQLite or PostgreSQL" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="MIT"

# tini as PID 1: it forwards SIGTERM and SIGINT to the service and reaps any process left behind.
# A user of the image's own, and the folder of the SQLite database, which only that user may read.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 petstore \
 && useradd --uid 10001 --gid petstore --home-dir /var/lib/petstore-orders --no-create-home --shell /usr/sbin/nologin petstore \
 && install -d -o petstore -g petstore -m 0700 /var/lib/petstore-orders

COPY --from=node-base /usr/local/bin/node /usr/local/bin/node
WORKDIR /opt/petstore-orders
COPY package.json LICENSE ./
COPY bin bin
COPY src/http/assets src/http/assets
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
RUN ln -s /opt/petstore-orders/bin/petstore-orders.js /usr/local/bin/petstore-orders

# The working directory holds the default SQLite database (./data/petstore.db) and, for PostgreSQL,
# `serve --demo`'s key file: both in the volume. Listens on every interface of the container.
WORKDIR /var/lib/petstore-orders
VOLUME /var/lib/petstore-orders
ENV HOST=0.0.0.0 \
    PORT=8080 \
    SHUTDOWN_TIMEOUT_MS=8000
EXPOSE 8080
USER 10001:10001
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["petstore-orders", "healthcheck"]
ENTRYPOINT ["/usr/bin/tini", "--", "petstore-orders"]
CMD ["serve"]
