# syntax=docker/dockerfile:1
# The image the chart runs (charts/switchboard/values.yaml: image.repository, engine.image), tagged with the
# package's version: `docker build -t ghcr.io/switchboard-dev/switchboard:0.1.0 .` (README.md, "Production build
# and container image").
# It holds what `npm pack` ships (bin/, dist/) and the production dependencies, and runs `switchboard <role>` as
# compiled JavaScript: TypeScript and tsx stay in the build stage.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY . .
# npm ci runs `prepare`: patch-package (sip.js's grammar patch) and `npm run build` (dist/). Then the development
# dependencies go. The npm cache persists between builds (BuildKit).
RUN --mount=type=cache,target=/root/.npm \
    npm ci --no-audit --no-fund \
    && npm prune --omit=dev --no-audit --no-fund \
    && find dist -name '*.tsbuildinfo' -delete

FROM node:20-bookworm-slim
# tini is PID 1: it hands SIGTERM to node (which drains, then stops the embedded PostgreSQL if it started one) and
# reaps orphans. Only node gets the signal (no -g). espeak-ng speaks `{tts}` prompts (TTS_COMMAND).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini espeak-ng \
    && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    SWITCHBOARD_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
# The data folder (the embedded PostgreSQL without DATABASE_URL, recordings, prompt cache) belongs to the `node`
# user (uid 1000, the chart's runAsUser); in a cluster the chart mounts a volume there.
RUN mkdir /data && chown node:node /data
USER node
# HTTP API (PORT), the health and metrics ports of `engine` and `operator`, the admission webhook, SIP and RTP.
EXPOSE 8080 8081 8082 9443 5060/udp 5060/tcp 20000-20999/udp
# Healthy while /healthz answers on the role's port: PORT (`all`, `api`), ENGINE_HTTP_PORT or OPERATOR_HTTP_PORT.
# (Kubernetes ignores this; the chart's probes do the same per role.)
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["node", "-e", "const e = process.env; Promise.any([e.PORT || 8080, e.ENGINE_HTTP_PORT || 8081, e.OPERATOR_HTTP_PORT || 8082].map((port) => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok || Promise.reject()))).then(() => process.exit(0), () => process.exit(1))"]
ENTRYPOINT ["tini", "--", "node", "/app/bin/switchboard.js"]
CMD ["all"]
