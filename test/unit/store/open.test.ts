import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdStore } from "../../../adapters/store/etcd.ts";
import { openStore, StoreUrlError } from "../../../adapters/store/open.ts";
import { SqliteStore } from "../../../adapters/store/sqlite.ts";

describe("openStore", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-open-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("opens an EtcdStore on every listed endpoint (no connection is made until a call)", async () => {
    const store = openStore("etcd://127.0.0.1:2379,etcd-2.local:32379");
    expect(store).toBeInstanceOf(EtcdStore);
    expect(store.description).toBe("etcd://127.0.0.1:2379,etcd-2.local:32379");
    await store.close();
  });

  it("opens a SqliteStore at an absolute path, creating its directories", async () => {
    const path = join(dir, "a", "b", "state.db");
    const store = openStore(`sqlite://${path}`);
    expect(store).toBeInstanceOf(SqliteStore);
    expect(store.description).toBe(`sqlite://${path}`);
    await store.put("/x", "1");
    await store.close();
    expect(existsSync(path)).toBe(true);
  });

  it("resolves a relative sqlite path against the working directory", async () => {
    const path = join(dir, "rel", "state.db");
    const store = openStore(`sqlite://${relative(process.cwd(), path)}`);
    expect(store.description).toBe(`sqlite://${path}`);
    await store.close();
  });

  it("opens a private in-memory store", async () => {
    const store = openStore("sqlite://:memory:");
    expect((await store.put("/x", "1")).revision).toBe(2);
    await store.close();
  });

  it.each([
    ["", /no scheme/],
    ["127.0.0.1:2379", /no scheme/],
    ["redis://127.0.0.1:6379", /unknown scheme "redis"/],
    ["etcd://", /no etcd endpoint/],
    ["etcd://127.0.0.1", /"127.0.0.1" is not host:port/],
    ["etcd://127.0.0.1:2379,", /"" is not host:port/],
    ["etcd://127.0.0.1:99999", /not host:port/],
    ["sqlite://", /no database file name/],
    ["sqlite://data/", /no database file name/],
    ["sqlite://state.db?mode=ro", /query strings/],
  ])("refuses %j with an error naming the URL", (url, reason) => {
    const error = (() => {
      try {
        openStore(url);
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(error).toBeInstanceOf(StoreUrlError);
    expect((error as StoreUrlError).url).toBe(url);
    expect((error as Error).message).toContain(JSON.stringify(url));
    expect((error as Error).message).toMatch(reason);
  });
});
