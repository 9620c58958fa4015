import type { FieldViolation } from "@hookpost/contract";

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
