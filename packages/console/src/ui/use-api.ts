import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { type ApiError, call } from "../api.js";

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
}

interface State<T> {
  /** The deps the data and error were loaded for. */
  deps: unknown[];
  data?: T;
  error?: ApiError;
  loading: boolean;
}

const sameDeps = (a: unknown[], b: unknown[]) =>
  a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

/**
 * Loads `fn` when `deps` change and, with `refreshMs`, again on that period (the overview and
 * attempt log stay live). A failed refresh keeps the last data beside the error; data loaded for
 * other deps is never returned (a lookup of another id shows its own answer, not the previous one).
 */
export function useApi<T>(fn: () => Promise<T>, deps: unknown[], refreshMs?: number): Loaded<T> {
  const [state, setState] = useState<State<T>>({ deps, loading: true });
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const reload = useCallback(() => setTick((n) => n + 1), []);

  useEffect(() => {
    let live = true;
    const loadingFor = deps;
    setState((s) =>
      sameDeps(s.deps, loadingFor) ? { ...s, loading: true } : { deps: loadingFor, loading: true },
    );
    void call(() => fnRef.current()).then((r) => {
      if (!live) return;
      setState((s) =>
        r.ok
          ? { deps: loadingFor, data: r.value, loading: false }
          : {
              deps: loadingFor,
              ...(sameDeps(s.deps, loadingFor) && s.data !== undefined ? { data: s.data } : {}),
              error: r.error,
              loading: false,
            },
      );
    });
    return () => {
      live = false;
    };
  }, [...deps, tick]);

  useEffect(() => {
    if (!refreshMs) return;
    const t = setInterval(() => {
      if (document.visibilityState === "visible") setTick((n) => n + 1);
    }, refreshMs);
    return () => clearInterval(t);
  }, [refreshMs]);

  if (!sameDeps(state.deps, deps)) return { data: undefined, error: undefined, loading: true, reload };
  return { data: state.data, error: state.error, loading: state.loading, reload };
}
