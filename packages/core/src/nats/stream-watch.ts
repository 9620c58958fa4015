import type { JetStreamManager, StreamInfo } from "nats";
import { Counter, Gauge, type Registry } from "prom-client";
import type { Logger } from "../log/logger.js";
import { isStreamFull } from "./jetstream-errors.js";
import {
  ATTEMPT_SUBJECTS,
  ATTEMPTS_STREAM,
  ensureBucketLimits,
  ensureSubjects,
  type StreamLimit,
  streamLimits,
  type TopologySettings,
} from "./topology.js";

/**
 * Messages not kept because a stream was at its byte limit: `refuse_new`, a write refused
 * (counted by the process that was refused); `drop_oldest`, old messages the server removed to
 * make room (counted by StreamWatch, from the stream's state). One counter per process, exposed
 * by every registry that asks (registerStreamFull).
 */
const streamFull = new Counter({
  name: "hookpost_stream_full_total",
  help: "Messages not kept because a stream was at its byte limit, by stream and policy (refuse_new: a write refused; drop_oldest: old messages removed to make room)",
  labelNames: ["stream", "policy"] as const,
  registers: [],
});

export function registerStreamFull(registry: Registry): void {
  registry.registerMetric(streamFull);
}

/** Counts a write refused because `stream` is full; true when `err` says so. */
export function countIfFull(stream: string, err: unknown): boolean {
  if (!isStreamFull(err)) return false;
  streamFull.inc({ stream, policy: "refuse_new" });
  return true;
}

/**
 * Reads every stream's state every `intervalMs` (one paged STREAM.LIST request): exposes bytes
 * held and byte limits, sets the byte limit of bucket streams created since (their stores create
 * them without one), and counts the messages a drop-oldest stream removed while at its limit.
 */
export class StreamWatch {
  readonly #jsm: JetStreamManager;
  readonly #settings: TopologySettings;
  readonly #limits: Map<string, StreamLimit>;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #last = new Map<string, { bytes: number; maxBytes: number; messages: number; lastSeq: number }>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(jsm: JetStreamManager, settings: TopologySettings, log: Logger, intervalMs: number) {
    this.#jsm = jsm;
    this.#settings = settings;
    this.#limits = new Map(streamLimits(settings).map((l) => [l.stream, l]));
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /** Exposes hookpost_stream_bytes / hookpost_stream_max_bytes and the full counter. */
  register(registry: Registry): void {
    const last = this.#last;
    registerStreamFull(registry);
    new Gauge({
      name: "hookpost_stream_bytes",
      help: "Bytes a stream holds (as of the last check)",
      labelNames: ["stream"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [stream, s] of last) this.set({ stream }, s.bytes);
      },
    });
    new Gauge({
      name: "hookpost_stream_max_bytes",
      help: "Byte limit of a stream",
      labelNames: ["stream"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [stream, s] of last) this.set({ stream }, s.maxBytes);
      },
    });
  }

  start(): void {
    void this.check();
    this.#timer = setInterval(() => void this.check(), this.#intervalMs);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
  }

  /** One check (never two at once); failures are logged and retried at the next interval. */
  check(): Promise<void> {
    this.#running ??= this.#check()
      .catch((err) => this.#log.warn({ err: (err as Error).message }, "cannot check the streams' limits"))
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  async #check(): Promise<void> {
    const changed = await ensureBucketLimits(this.#jsm, this.#settings);
    if (changed.length > 0) this.#log.info({ streams: changed }, "byte limits set");
    const infos: StreamInfo[] = [];
    for await (const si of this.#jsm.streams.list()) infos.push(si);
    for (const si of infos) {
      if (si.config.name === ATTEMPTS_STREAM && (await ensureSubjects(this.#jsm, si, ATTEMPT_SUBJECTS))) {
        this.#log.warn("attempt log subjects restored (an older replica had set its own list)");
      }
      const limit = this.#limits.get(si.config.name);
      if (!limit) continue;
      const { state } = si;
      const prev = this.#last.get(limit.stream);
      this.#last.set(limit.stream, {
        bytes: state.bytes,
        maxBytes: si.config.max_bytes,
        messages: state.messages,
        lastSeq: state.last_seq,
      });
      if (limit.policy !== "drop_oldest" || !prev || !atLimit(si)) continue;
      // Removed since the last check = written - net growth. Near the limit, removals are the
      // byte limit at work (age and explicit deletes also remove: an approximation).
      const removed = state.last_seq - prev.lastSeq - (state.messages - prev.messages);
      if (removed > 0) streamFull.inc({ stream: limit.stream, policy: "drop_oldest" }, removed);
    }
  }
}

/** Within two average messages (or 2 %) of its byte limit: a drop-oldest stream is removing. */
function atLimit(si: StreamInfo): boolean {
  const max = si.config.max_bytes;
  if (max <= 0 || si.state.messages === 0) return false;
  const margin = Math.max((2 * si.state.bytes) / si.state.messages, max * 0.02);
  return si.state.bytes + margin >= max;
}
