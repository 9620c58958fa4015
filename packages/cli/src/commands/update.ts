import { UsageError } from "../errors.js";

/**
 * A request's message and its update mask, built together: each field a flag sets is named in
 * the mask by its proto name (the snake_case of the message key).
 */
export class Update<T extends object> {
  readonly paths: string[] = [];

  constructor(readonly message: T) {}

  /** Sets `key` to `value`; undefined leaves it unset in the message, so the masked field clears. */
  set<K extends keyof T & string>(key: K, value: T[K] | undefined): void {
    if (value !== undefined) this.message[key] = value;
    this.paths.push(key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
  }

  /** The message and its mask for the update RPC; a usage error when no flag changed anything. */
  changes(): { message: T; paths: string[] } {
    if (this.paths.length === 0) throw new UsageError("nothing to change: give at least one flag to update");
    return { message: this.message, paths: this.paths };
  }
}
