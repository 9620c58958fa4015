/** A configuration error: the service refuses to start and says which variable is wrong. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}
