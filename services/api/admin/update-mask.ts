import type { FieldViolation } from "@hookpost/contract";
import { throwIfInvalid } from "../invalid.js";

/**
 * The paths of an update mask that the resource cannot take: output-only fields are named as
 * such, unknown ones with the list of those that can change.
 */
export function maskViolations(
  paths: readonly string[],
  updatable: readonly string[],
  outputOnly: ReadonlySet<string>,
): FieldViolation[] {
  const out: FieldViolation[] = [];
  paths.forEach((p, i) => {
    if (updatable.includes(p)) return;
    out.push({
      field: `update_mask.paths[${i}]`,
      description: outputOnly.has(p)
        ? `"${p}" cannot be changed`
        : `unknown field "${p.slice(0, 80)}": use ${updatable.join(", ")}`,
    });
  });
  return out;
}

/**
 * The fields an update changes: those its mask names, or every updatable one for an empty mask
 * (`replaceAll`). A mask naming anything else is refused before the resource is read.
 */
export function maskedFields<U extends string>(
  paths: readonly string[],
  updatable: readonly U[],
  outputOnly: ReadonlySet<string>,
): { replaceAll: boolean; fields: Set<U> } {
  throwIfInvalid(maskViolations(paths, updatable, outputOnly));
  const replaceAll = paths.length === 0;
  return { replaceAll, fields: new Set<U>(replaceAll ? updatable : (paths as U[])) };
}
