import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { type IngestHandle, ingestConfigFromEnv, startIngest } from "@hookpost/api";
import { adminMetadata, createClient } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ConfigError, DEFAULT_GRPC_LIMITS } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { ADMIN_TOKEN, failure, silentLogger, testConfig } from "./harness.js";

let nats: NatsServer;
let ingest: IngestHandle;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hookpost-tls-"));
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
  nats = await NatsServer.start();
  ingest = await startIngest(
    testConfig(nats.url, { tls: { certFile: join(dir, "cert.pem"), keyFile: join(dir, "key.pem") } }),
    { logger: silentLogger() },
  );
});

afterAll(async () => {
  await ingest?.close();
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("TLS", () => {
  it("serves gRPC over TLS when TLS_CERT_FILE and TLS_KEY_FILE are set", async () => {
    // By name: the certificate is for localhost (TLS SNI does not take IP addresses).
    const tls = createClient(AdminService, ingest.address.replace("127.0.0.1", "localhost"), {
      credentials: credentials.createSsl(readFileSync(join(dir, "cert.pem"))),
      metadata: adminMetadata(ADMIN_TOKEN),
    });
    const plain = createClient(AdminService, ingest.address, { metadata: adminMetadata(ADMIN_TOKEN) });
    try {
      expect((await tls.createSource({ name: "over tls" })).writeKey).not.toBe("");
      expect((await failure(plain.listSources({}, { timeoutMs: 3_000 }))).code).toBe(Code.UNAVAILABLE);
    } finally {
      tls.close();
      plain.close();
    }
  });

  it("needs both files, and says so", () => {
    expect(() => ingestConfigFromEnv({ TLS_CERT_FILE: "/x.pem" })).toThrow(ConfigError);
    expect(() => ingestConfigFromEnv({ TLS_KEY_FILE: "/x.pem" })).toThrow(/set together/);
    const c = ingestConfigFromEnv({ TLS_CERT_FILE: "/c.pem", TLS_KEY_FILE: "/k.pem" });
    expect(c.tls).toEqual({ certFile: "/c.pem", keyFile: "/k.pem" });
  });

  it("reads the documented defaults from the environment", () => {
    const c = ingestConfigFromEnv({});
    expect(c).toMatchObject({
      natsUrl: "nats://127.0.0.1:4222",
      address: "0.0.0.0:50051",
      opsAddress: "127.0.0.1:9090",
      grpc: DEFAULT_GRPC_LIMITS,
      publishTimeoutMs: 8000,
      logLevel: "info",
    });
    expect(c.adminToken).toBeUndefined();
    expect(c.tls).toBeUndefined();
    expect(ingestConfigFromEnv({ OPS_ADDR: "off" }).opsAddress).toBeUndefined();
    expect(() => ingestConfigFromEnv({ INGEST_ADDR: "0.0.0.0:99999" })).toThrow(/INGEST_ADDR/);
  });

  it("a missing certificate file stops start-up with a clear error", async () => {
    await expect(
      startIngest(
        testConfig(nats.url, { tls: { certFile: join(dir, "nope.pem"), keyFile: join(dir, "key.pem") } }),
        {
          logger: silentLogger(),
        },
      ),
    ).rejects.toThrow(/TLS_CERT_FILE: cannot read/);
  });
});
