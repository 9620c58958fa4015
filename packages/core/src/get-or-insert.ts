/** The value of `key`, created by `make` and stored when the map has none (a Map or WeakMap; Map.getOrInsertComputed, not yet in Node 20). */
export function getOrInsert<K, V>(
  map: { get(key: K): V | undefined; set(key: K, value: V): unknown },
  key: K,
  make: () => V,
): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
