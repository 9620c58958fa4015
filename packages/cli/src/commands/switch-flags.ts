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

/** `create` under `parent`, with `--id` and `--disabled` (`disabled` says what a disabled one does not do). */
export function createCommand(parent: Command, kind: string, description: string, disabled: string): Command {
  return parent
    .command("create")
    .description(description)
    .addOption(idOption(kind))
    .option("--disabled", disabled);
}

/** What a create command's flags say of every resource: its id ("": generated), name, and whether it is enabled. */
export function createdFields(opts: CreateFlags & { name?: string }): {
  id: string;
  name: string;
  enabled: boolean;
} {
  return { id: opts.id ?? "", name: opts.name!, enabled: !opts.disabled };
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
