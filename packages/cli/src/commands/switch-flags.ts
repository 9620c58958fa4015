import { type Command, Option } from "commander";
import type { Update } from "./update.js";

/** `--id` of a create command: the new resource's id, or one the server generates. */
export function idOption(kind: string): Option {
  return new Option("--id <id>", `the ${kind} id (letters, digits, - and _); generated when omitted`);
}

/** What the create command of a resource that can be switched off takes besides its fields. */
export interface CreateFlags {
  id?: string;
  disabled?: boolean;
}

/** `--id` and `--disabled` of a create command; `disabled` says what a disabled one does not do. */
export function createFlags(cmd: Command, kind: string, disabled: string): Command {
  return cmd.addOption(idOption(kind)).option("--disabled", disabled);
}

/** `--enable` / `--disable` of an update command (they conflict: at most one is given). */
export interface EnableFlags {
  enable?: boolean;
  disable?: boolean;
}

/** `--enable` and `--disable`, each saying what it does for this kind of resource. */
export function enableFlags(cmd: Command, enable: string, disable: string): Command {
  return cmd.addOption(new Option("--enable", enable).conflicts("disable")).option("--disable", disable);
}

/** Sets `enabled`, named in the mask, only when --enable or --disable was given. */
export function setEnabled(update: Update<{ enabled?: boolean | undefined }>, opts: EnableFlags): void {
  if (opts.enable || opts.disable) update.set("enabled", Boolean(opts.enable));
}
