import type { HookpostError } from "@hookpost/contract";

/** The gRPC code name a call ends with: "OK", or the error's (NOT_FOUND, INVALID_ARGUMENT...). */
export async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (err) {
    return (err as HookpostError).codeName;
  }
}
