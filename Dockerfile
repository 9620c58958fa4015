# syntax=docker/dockerfile:1
# One image for every Hookpost service; the compose file picks the command.
# Node 20 is past end of life: the image runs the current (active) LTS, Node 26 (Node 24 is in
# maintenance since October 2026); the code also runs on 20.

FROM node:26-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY gen ./gen
COPY contract ./contract
COPY lib ./lib
COPY services ./services
COPY client ./client
COPY receiver ./receiver
COPY cli ./cli
COPY console ./console
RUN npm run build && npm prune --omit=dev

FROM node:26-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
USER node
EXPOSE 50051 8080 9090 9091
CMD ["node", "dist/services/ingest/main.js"]
