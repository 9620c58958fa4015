// Import direction of the workspaces (issue 23), checked by `npm run lint`:
//   contract <- client, receiver;  contract, receiver <- core <- api, dispatcher;  cli uses contract and client.
//   (core signs webhooks with the receiver package: the signer is the verifier customers use.)
// Across packages only through package names and their public entry points ("exports").
const DIR = {
  contract: "packages/contract",
  client: "packages/client",
  receiver: "packages/receiver",
  core: "packages/core",
  cli: "packages/cli",
  console: "packages/console",
  api: "services/api",
  dispatcher: "services/dispatcher",
  local: "services/local",
};
const ALLOWED = {
  contract: [],
  client: ["contract"],
  receiver: ["contract"],
  core: ["contract", "receiver"],
  cli: ["contract", "client"],
  console: ["contract"],
  api: ["contract", "core", "receiver", "console"],
  dispatcher: ["contract", "core", "receiver"],
  local: ["contract", "core", "client", "console"],
};
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
// What other packages may reach: an entry point (mod.ts or its build), the generated code, or
// the browser-safe admin paging, consent rules and shaping wording (the console must not pull
// grpc-js in through mod.ts).
const PUBLIC = [
  "/src/mod\\.ts$",
  "^packages/contract/src/admin-pages\\.ts$",
  "^packages/contract/src/attempt-search\\.ts$",
  "^packages/contract/src/consent\\.ts$",
  "^packages/contract/src/portal-links\\.ts$",
  "^packages/contract/src/shaping-text\\.ts$",
  "^services/[^/]+/mod\\.ts$",
  "/dist/",
  "^packages/contract/src/gen/",
  "/package\\.json$",
];

// A relative import into a package folder (a by-name import resolves as aliased-workspace).
const RELATIVE_TO_PACKAGE = {
  path: "^(packages|services)/",
  dependencyTypes: ["local"],
  dependencyTypesNot: ["aliased", "aliased-workspace", "undetermined"],
};

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No import cycles.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-relative-import-across-packages",
      comment: "Another package is imported by its name (@hookpost/...), never by a relative path.",
      severity: "error",
      from: { path: "^(packages|services)/([^/]+)/" },
      to: { ...RELATIVE_TO_PACKAGE, pathNot: "^$1/$2/" },
    },
    {
      name: "tests-import-packages-by-name",
      comment: "test/ and bench/ import the packages by name, not by a relative path.",
      severity: "error",
      from: { path: "^(test|bench)/" },
      to: RELATIVE_TO_PACKAGE,
    },
    {
      name: "no-package-internals",
      comment: "Only a package's public entry point (package.json exports) is imported from outside it.",
      severity: "error",
      from: { path: "^((packages|services)/[^/]+)/" },
      to: { path: "^(packages|services)/[^/]+/", pathNot: ["^$1/", ...PUBLIC] },
    },
    {
      name: "no-package-internals-from-tests",
      comment:
        "Only a package's public entry point (package.json exports) is imported from test/ and bench/.",
      severity: "error",
      from: { path: "^(test|bench)/" },
      to: { path: "^(packages|services)/[^/]+/", pathNot: PUBLIC },
    },
    ...Object.entries(ALLOWED).map(([pkg, allowed]) => ({
      name: `direction-${pkg}`,
      comment: `${pkg} may depend on ${allowed.length ? allowed.join(", ") : "no other package"} only.`,
      severity: "error",
      from: { path: `^${esc(DIR[pkg])}/` },
      to: {
        path: "^(packages|services)/",
        pathNot: [`^${esc(DIR[pkg])}/`, ...allowed.map((a) => `^${esc(DIR[a])}/`)],
      },
    })),
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(dist|node_modules)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["@hookpost/source", "import", "node", "default"],
      extensions: [".ts", ".tsx", ".js", ".mjs", ".d.ts"],
      mainFields: ["module", "main", "types"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
