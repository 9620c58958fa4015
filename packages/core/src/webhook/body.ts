import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { StoredCall } from "@hookpost/contract";

/**
 * The webhook body of a call (SPEC section 5): exactly these keys in this order, keys the call
 * did not carry left out (never null), `anonymousId` right after the user id when carried.
 * Rendered once by the router; every attempt sends these exact bytes, so signatures stay valid.
 */
export function renderBody(call: StoredCall): string {
  return JSON.stringify(bodyObject(call));
}

export function bodyObject(call: StoredCall): Record<string, JsonValue> {
  const b: Record<string, JsonValue> = {};
  const put = (key: string, value: JsonValue | undefined) => {
    if (value !== undefined && value !== null && value !== "") b[key] = value;
  };
  const ids = () => {
    put("userId", call.userId);
    put("anonymousId", call.anonymousId);
  };
  const timestamp = isoMillis(call.timestamp) ?? isoMillis(call.receivedAt) ?? new Date().toISOString();
  const context = isObject(call.context) ? call.context : {};
  // Every body but delete's opens with the version and the type.
  const head = () => {
    put("version", 1);
    put("type", call.type);
  };

  switch (call.type) {
    case "delete":
      put("type", "delete");
      put("userId", call.userId);
      put("timestamp", timestamp);
      return b;
    case "page":
      head();
      ids();
      put("properties", pageProperties(call));
      break;
    case "screen":
      head();
      ids();
      put("name", call.name);
      break;
    case "identify":
      head();
      ids();
      put("traits", objectOrUndefined(call.traits));
      break;
    case "track":
      head();
      ids();
      put("event", call.event);
      put("properties", objectOrUndefined(call.properties));
      break;
    case "alias":
      // The seed's alias body: identity keys written with spaces, no previousId/userId keys.
      head();
      put("timestamp", timestamp);
      put("Previous ID", call.previousId);
      put("User ID", call.userId);
      put("anonymousId", call.anonymousId);
      put("context", context);
      return b;
    case "group":
      head();
      put("groupId", call.groupId);
      ids();
      put("traits", objectOrUndefined(call.traits));
      break;
    default:
      throw new Error(`unknown call type: ${String((call as { type: unknown }).type)}`);
  }
  put("timestamp", timestamp);
  put("context", context);
  return b;
}

/** A page's name and category join its properties, unless the properties already set them. */
function pageProperties(call: StoredCall): JsonObject | undefined {
  const props = objectOrUndefined(call.properties);
  const out: JsonObject = props ? { ...props } : {};
  let added = false;
  for (const key of ["name", "category"] as const) {
    const value = call[key];
    if (typeof value === "string" && value !== "" && !Object.hasOwn(out, key)) {
      out[key] = value;
      added = true;
    }
  }
  return props || added ? out : undefined;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function objectOrUndefined(v: unknown): JsonObject | undefined {
  return isObject(v) ? v : undefined;
}

/** ISO 8601 UTC with milliseconds, or undefined when `text` is not a date. */
function isoMillis(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const d = new Date(text);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
