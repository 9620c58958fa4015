# syntax=docker/dockerfile:1
# One image for every Hookpost service; the compose file picks the command.
# Node 20 is past end of life: the image runs the current (active) LTS, Node 26 (Node 24 is in
# maintenance since October 2026); the code also runs on 20.

FROM node:26-bookworm-slim AS build
WORKDIR /app
# The workspaces: every package.json and its sources (npm ci links them into node_modules).
COPY package.json package-lock.json tsconfig.json ./
# The protobuf code is generated from proto/ by npm ci (the prepare script runs buf).
COPY buf.yaml buf.gen.yaml ./
COPY proto ./proto
COPY packages ./packages
COPY services ./services
RUN npm ci --no-audit --no-fund
RUN npm run build && npm prune --omit=dev

FROM node:26-bookworm-slim
ENV NODE_ENV=production
# A young generation of 32 MiB semi-spaces (Node 20's default is 16): every call allocates
# short-lived objects, and the smaller one spent twice the CPU in garbage collection (profiles of
# `npm run bench -- perf`: 5-11 % against 3-5 % of each service's CPU). It costs memory under load
# (docs/operations.md); override NODE_OPTIONS to change it.
ENV NODE_OPTIONS=--max-semi-space-size=32
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/packages ./packages
COPY --from=build /app/services ./services
USER node
EXPOSE 50051 8080 9090 9091
CMD ["node", "services/api/dist/main.js"]
