import { AlreadyExistsError } from "@hookpost/core";

/**
 * The revision of a store's create. A record already stored under that id becomes the caller's
 * `alreadyExists` answer (ALREADY_EXISTS naming its kind of record); any other failure stays as
 * it is.
 */
export async function createOnce(create: () => Promise<number>, alreadyExists: () => Error): Promise<number> {
  try {
    return await create();
  } catch (err) {
    if (err instanceof AlreadyExistsError) throw alreadyExists();
    throw err;
  }
}
