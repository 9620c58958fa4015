import { execFile } from "node:child_process";

export interface JsonChildOptions {
  nodeFlags?: string[];
  timeoutMs?: number;
  /** Pass the child's stderr (progress lines) through; otherwise it is shown only on failure. */
  showStderr?: boolean;
}

/**
 * Runs a bench file in a fresh Node process (through tsx) and returns the JSON value on the last
 * line of its stdout. Fresh processes keep one measurement's heap and timers out of the next.
 */
export function runJsonChild<T>(
  label: string,
  file: string,
  args: string[],
  o: JsonChildOptions = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [...(o.nodeFlags ?? []), "--conditions=@hookpost/source", "--import", "tsx", file, ...args],
      { maxBuffer: 16 << 20, timeout: o.timeoutMs ?? 0 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${label} failed: ${err.message}${o.showStderr ? "" : `\n${stderr}`}`));
        else resolve(JSON.parse(stdout.trim().split("\n").pop()!) as T);
      },
    );
    if (o.showStderr) child.stderr?.pipe(process.stderr);
  });
}
