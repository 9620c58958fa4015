import { ConfigError } from "../env/read-env.js";

/**
 * Stored secrets this service cannot decrypt with SECRETS_KEYS: the key they name is missing, or
 * is not the one they were encrypted with. A configuration error, so the service stops with this
 * one line (it names key ids, never a key or a secret).
 */
export class SecretsKeyError extends ConfigError {}
