import { format } from "node:util";
import { clientSetting } from "@hookpost/contract";

export type DebugLog = (message: string, ...args: unknown[]) => void;

const noop: DebugLog = () => {};

/**
 * Whether `namespace` is on in a DEBUG value, with the conventions of the `debug` package that
 * users already know: comma or space separated names, `*` wildcards, `-name` to exclude.
 */
export function debugEnabled(namespace: string, value: string | undefined = clientSetting("DEBUG")): boolean {
  if (!value) return false;
  let enabled = false;
  for (const raw of value.split(/[\s,]+/)) {
    if (!raw) continue;
    const exclude = raw.startsWith("-");
    const pattern = exclude ? raw.slice(1) : raw;
    if (!matches(pattern, namespace)) continue;
    if (exclude) return false;
    enabled = true;
  }
  return enabled;
}

function matches(pattern: string, name: string): boolean {
  const re = new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`);
  return re.test(name);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A logger writing `<time> analytics <message>` lines to stderr, or a no-op when off. */
export function createDebug(namespace: string, enabled = debugEnabled(namespace)): DebugLog {
  if (!enabled) return noop;
  return (message, ...args) => {
    process.stderr.write(`${new Date().toISOString()} ${namespace} ${format(message, ...args)}\n`);
  };
}
