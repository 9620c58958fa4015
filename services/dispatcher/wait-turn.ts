/**
 * Waits for a turn in `queue` (first come first served): until a holder wakes the first waiter
 * (`queue.shift()?.()`), `ms` passes or `signal` aborts. Whoever resumes looks again: a turn is
 * a chance, not a guarantee.
 */
export function waitTurn(queue: (() => void)[], ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      const i = queue.indexOf(done);
      if (i >= 0) queue.splice(i, 1);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done);
    queue.push(done);
  });
}
