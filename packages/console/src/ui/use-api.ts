import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { type ApiError, call } from "../api.js";

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads `fn` when `deps` change and, with `refreshMs`, again on that period (the overview and
 * attempt log stay live). A failed refresh keeps the last data beside the error.
 */
export function useApi<T>(fn: () => Promise<T>, deps: unknown[], refreshMs?: number): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const reload = useCallback(() => setTick((n) => n + 1), []);

  useEffect(() => {
    let live = true;
    setLoading(true);
    void call(() => fnRef.current()).then((r) => {
      if (!live) return;
      setLoading(false);
      if (r.ok) {
        setData(r.value);
        setError(undefined);
      } else setError(r.error);
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

  return { data, error, loading, reload };
}
