/**
 * The environment variables the client library and the CLI read. Declared here because the client
 * may depend on the contract only; @hookpost/core's configuration schema lists them in its docs.
 * Nothing else in the client or the CLI reads process.env.
 */
export const CLIENT_SETTINGS = {
  HOOKPOST_ENDPOINT: {
    default: "127.0.0.1:50051",
    description: "ingest address (`host:port` or `https://host:port`) of the client library and the CLI",
  },
  HOOKPOST_WRITE_KEY: { default: undefined, description: "write key of CLI `send`" },
  ADMIN_TOKEN: { default: undefined, description: "Bearer token of the CLI's admin commands" },
  DEBUG: { default: undefined, description: "`analytics`: the client library logs to stderr" },
} as const satisfies Record<string, { default: string | undefined; description: string }>;

export type ClientSetting = keyof typeof CLIENT_SETTINGS;

/** A client/CLI variable; unset or empty: undefined (the caller applies its default). */
export function clientSetting(name: ClientSetting): string | undefined {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
}

/**
 * A variable the user names (`--secret-env NAME`, `${NAME}` in an apply file): not a setting of
 * Hookpost, so not in the schema.
 */
export function userVariables(): Record<string, string | undefined> {
  return process.env;
}
