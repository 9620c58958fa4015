/**
 * A stand-in for an object a hook creates later (a fixture started in beforeAll/beforeEach): each
 * property read goes to the current object, methods bound to it. Reading it before the hook ran
 * throws, saying `what`.
 */
export function lateBound<T extends object>(current: () => T | undefined, what: string): T {
  const target = (): T => {
    const t = current();
    if (!t) throw new Error(`${what}: use it inside a test or hook`);
    return t;
  };
  return new Proxy({} as T, {
    get(_, key) {
      const t = target();
      const value = Reflect.get(t, key, t);
      return typeof value === "function" ? value.bind(t) : value;
    },
    set: (_, key, value) => Reflect.set(target(), key, value),
  });
}
