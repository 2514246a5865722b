// Secret-sync with the real secrets vault on a private etcd and the real engines: files land in created and running
// containers with root ownership and the stored mode and content; a secret change reaches a running
// container; a missing secret and a sealed vault are handled; markers follow their containers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { digestOf } from "../../../controllers/secretsync/index.ts";
import { NotFoundError } from "../../../adapters/cluster/index.ts";
import { buildTar } from "../../../adapters/cluster/archive.ts";
import { Harness, exec, readFileOf } from "./support.ts";

const h = new Harness();
/** Every secret content the tests write: none may appear in a log line. */
const contents: string[] = [];
const putSecret = async (proc: string, path: string, content: string, mode?: string) => {
  contents.push(content);
  await h.putSecret(proc, path, content, mode);
};

beforeAll(async () => {
  await h.start();
});

afterAll(async () => {
  await h.cleanup();
});

describe("secret-sync", () => {
  it("installs the listed files into a created container before it starts; relative paths under /platform/app", async () => {
    const proc = h.proc("created");
    await putSecret(proc, "config/app.yaml", "db: secret-1\n", "440");
    await putSecret(proc, "/etc/capstan/token", "tok-1", "400");
    await putSecret(proc, "unlisted.txt", "never installed");
    await h.putSpec(proc, [["config/app.yaml", "/etc/capstan/token"]]);
    const ref = await h.container(proc);

    const marker = await h.until("marker", () => h.marker(ref.id));
    expect(marker.error).toBeUndefined();
    expect(marker.podGroup).toBe(proc);
    expect(marker.files).toEqual([
      { path: "config/app.yaml", digest: digestOf("db: secret-1\n", "440") },
      { path: "/etc/capstan/token", digest: digestOf("tok-1", "400") },
    ]);
    // Still created: the files are there before the process ever runs.
    expect((await h.cluster.inspect(ref)).status.state).toBe("created");
    expect(await readFileOf(ref, "/platform/app/config/app.yaml")).toEqual({ uid: 0, gid: 0, mode: 0o440, content: "db: secret-1\n" });
    expect(await readFileOf(ref, "/etc/capstan/token")).toEqual({ uid: 0, gid: 0, mode: 0o400, content: "tok-1" });
    expect(await readFileOf(ref, "/platform/app/unlisted.txt")).toBeUndefined();

    await h.cluster.start(ref);
    const out = await exec(ref, "stat -c '%u %g %a %n' /platform/app/config/app.yaml /etc/capstan/token /etc; cat /platform/app/config/app.yaml /etc/capstan/token");
    expect(out).toBe("0 0 440 /platform/app/config/app.yaml\n0 0 400 /etc/capstan/token\n0 0 755 /etc\ndb: secret-1\ntok-1");
  });

  it("installs into a running container and follows a secret change within seconds, without re-uploading unchanged files", async () => {
    const proc = h.proc("running");
    const ref = await h.container(proc, "n2");
    await h.cluster.start(ref);
    await putSecret(proc, "app.env", "A=1\n", "600");
    await h.putSpec(proc, [["app.env"]]);
    await h.until("first install", async () => (await h.marker(ref.id))?.files[0]?.digest === digestOf("A=1\n", "600"));
    expect(await exec(ref, "stat -c '%u %g %a' /platform/app/app.env; cat /platform/app/app.env")).toBe("0 0 600\nA=1\n");

    const changedAt = Date.now();
    await putSecret(proc, "app.env", "A=2\n", "600");
    await h.until("changed file in the running container", async () => (await exec(ref, "cat /platform/app/app.env")) === "A=2\n", 10_000);
    expect(Date.now() - changedAt).toBeLessThan(5_000);
    await h.until("marker digest follows", async () => (await h.marker(ref.id))?.files[0]?.digest === digestOf("A=2\n", "600"));

    // A mode-only change reinstalls too.
    await putSecret(proc, "app.env", "A=2\n", "400");
    await h.until("mode follows", async () => (await exec(ref, "stat -c '%a' /platform/app/app.env")) === "400\n");

    // Level-triggered but idempotent: events that change nothing (a spec rewrite, a container
    // stop/start) upload nothing.
    await h.until("marker settles", async () => (await h.marker(ref.id))?.files[0]?.digest === digestOf("A=2\n", "400"));
    const before = h.uploads(ref.id);
    const at = (await h.marker(ref.id))?.at;
    await h.putSpec(proc, [["app.env"]]);
    await h.cluster.stop(ref, { timeoutSeconds: 0 });
    await h.cluster.start(ref);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(h.uploads(ref.id)).toBe(before);
    expect((await h.marker(ref.id))?.at).toBe(at);
  });

  it("writes an error marker and installs nothing when a listed secret is not written; installs once it is", async () => {
    const proc = h.proc("missing");
    await putSecret(proc, "present.txt", "here");
    await h.putSpec(proc, [["present.txt", "absent.yaml"]]);
    const ref = await h.container(proc);
    const marker = await h.until("error marker", () => h.marker(ref.id));
    expect(marker).toMatchObject({ podGroup: proc, files: [], error: `secret file absent.yaml is not written for ${proc}` });
    expect(await readFileOf(ref, "/platform/app/present.txt")).toBeUndefined();

    await putSecret(proc, "absent.yaml", "now: written\n");
    const fixed = await h.until("marker without error", async () => {
      const m = await h.marker(ref.id);
      return m && m.error === undefined ? m : undefined;
    });
    expect(fixed.files.map((f) => f.path)).toEqual(["present.txt", "absent.yaml"]);
    expect(await readFileOf(ref, "/platform/app/absent.yaml")).toEqual({ uid: 0, gid: 0, mode: 0o400, content: "now: written\n" });
  });

  it("a deleted secret leaves the running container (rm) and a created one is emptied; the marker says it is not written", async () => {
    const proc = h.proc("deleted");
    await putSecret(proc, "keep.txt", "keep-content-41f");
    await putSecret(proc, "/etc/capstan/gone.txt", "gone-content-93a", "440");
    await h.putSpec(proc, [["keep.txt", "/etc/capstan/gone.txt"]]);
    const running = await h.container(proc, "n1");
    const created = await h.container(proc, "n2");
    await h.cluster.start(running);
    for (const ref of [running, created]) await h.until("installed", async () => (await h.marker(ref.id))?.files.length === 2);
    expect(await exec(running, "cat /etc/capstan/gone.txt")).toBe("gone-content-93a");

    await h.deleteSecret(proc, "/etc/capstan/gone.txt");
    const error = `secret file /etc/capstan/gone.txt is not written for ${proc}`;
    await h.until("file removed from the running container", async () => (await exec(running, "test -e /etc/capstan/gone.txt && echo there || echo gone")) === "gone\n", 10_000);
    expect(await exec(running, "cat /platform/app/keep.txt")).toBe("keep-content-41f");
    const m = await h.until("error marker", async () => {
      const x = await h.marker(running.id);
      return x?.error === error ? x : undefined;
    });
    expect(m).toMatchObject({ files: [], present: ["/platform/app/keep.txt"] });
    // A created container cannot run rm: the file is emptied, its content gone.
    await h.until("emptied in the created container", async () => (await readFileOf(created, "/etc/capstan/gone.txt"))?.content === "", 10_000);
    expect(await readFileOf(created, "/etc/capstan/gone.txt")).toEqual({ uid: 0, gid: 0, mode: 0o400, content: "" });
    expect(await h.marker(created.id)).toMatchObject({ error, present: ["/platform/app/keep.txt"], emptied: ["/etc/capstan/gone.txt"] });
    // ...and removed once it runs.
    await h.cluster.start(created);
    await h.until("removed once the container runs", async () => (await exec(created, "test -e /etc/capstan/gone.txt && echo there || echo gone")) === "gone\n", 10_000);
    await h.until("marker forgets it", async () => (await h.marker(created.id))?.emptied === undefined);

    // Written again: installed again, marker without error.
    await putSecret(proc, "/etc/capstan/gone.txt", "back-content-5c7");
    await h.until("reinstalled", async () => (await exec(running, "cat /etc/capstan/gone.txt")) === "back-content-5c7", 10_000);
    await h.until("marker without error", async () => (await h.marker(running.id))?.error === undefined);
  });

  it("a deleted secret leaves a running container whose user is not root (rm runs as root)", async () => {
    const proc = h.proc("nonroot");
    await putSecret(proc, "r.txt", "nonroot-content-8d1");
    await h.putSpec(proc, [["r.txt"]]);
    const ref = await h.container(proc, "n1", 0, "65534");
    await h.cluster.start(ref);
    await h.until("installed", async () => (await h.marker(ref.id))?.files.length === 1);
    await h.deleteSecret(proc, "r.txt");
    await h.until("removed", async () => (await exec(ref, "test -e /platform/app/r.txt && echo there || echo gone")) === "gone\n", 10_000);
    const m = await h.until("error marker", async () => {
      const x = await h.marker(ref.id);
      return x?.error !== undefined ? x : undefined;
    });
    expect(m).toMatchObject({ present: [], error: `secret file r.txt is not written for ${proc}` });
    expect(m.emptied).toBeUndefined();
  });

  it("a deleted secret in a running container that cannot rm it (no rm on its PATH) is emptied, and not retried for ever", async () => {
    const proc = h.proc("norm");
    await putSecret(proc, "n.txt", "cannot-rm-content-2e8");
    await h.putSpec(proc, [["n.txt"]]);
    const ref = await h.container(proc, "n1", 0, undefined, ["PATH=/nonexistent"]);
    await h.cluster.start(ref);
    await h.until("installed", async () => (await h.marker(ref.id))?.files.length === 1);
    await h.deleteSecret(proc, "n.txt");
    await h.until("emptied", async () => (await readFileOf(ref, "/platform/app/n.txt"))?.content === "", 10_000);
    const m = await h.until("error marker with emptied", async () => {
      const x = await h.marker(ref.id);
      return x?.emptied !== undefined ? x : undefined;
    });
    expect(m).toMatchObject({ present: [], emptied: ["/platform/app/n.txt"], error: `secret file n.txt is not written for ${proc}` });
    // The container runs again (a restart): one more rm, which fails the same way; then the empty
    // file is left alone.
    await h.cluster.stop(ref, { timeoutSeconds: 0 });
    await h.cluster.start(ref);
    await h.until("marker settles without emptied", async () => (await h.marker(ref.id))?.emptied === undefined, 10_000);
    expect(await readFileOf(ref, "/platform/app/n.txt")).toMatchObject({ content: "" });
  });

  it("a removal whose final marker write is lost still reinstalls the same secret written again (intent first)", async () => {
    const proc = h.proc("lost");
    await putSecret(proc, "l.txt", "lost-write-content-6b0");
    await h.putSpec(proc, [["l.txt"]]);
    const ref = await h.container(proc, "n1");
    await h.cluster.start(ref);
    await h.until("installed", async () => (await h.marker(ref.id))?.files.length === 1);
    // Every marker write of this container that no longer lists the file in `present` (the
    // bookkeeping after the rm) is lost, for the whole test: a retry racing the next PUT cannot
    // land one either.
    let lost = 0;
    h.failMarkerPut = (key, value) => {
      if (!key.endsWith(ref.id) || (JSON.parse(value) as { present?: string[] }).present?.includes("/platform/app/l.txt") !== false) return false;
      lost++;
      return true;
    };
    try {
      await h.deleteSecret(proc, "l.txt");
      await h.until("removed", async () => (await exec(ref, "test -e /platform/app/l.txt && echo there || echo gone")) === "gone\n", 10_000);
      await h.until("a bookkeeping write lost", async () => lost > 0);
      // The same content and mode again: the same digest as the old marker's.
      await putSecret(proc, "l.txt", "lost-write-content-6b0");
      await h.until("installed again", async () => (await exec(ref, "cat /platform/app/l.txt 2>&1")) === "lost-write-content-6b0", 10_000);
      await h.until("marker covers it", async () => {
        const m = await h.marker(ref.id);
        return m?.error === undefined && m?.files.length === 1 && m.present?.includes("/platform/app/l.txt");
      });
    } finally {
      h.failMarkerPut = undefined;
    }
  });

  it("a secret written under one spelling satisfies a pod listing the other, both ways", async () => {
    const proc = h.proc("spelling");
    await putSecret(proc, "/platform/app/abs-written.conf", "abs-written-6d2");
    await putSecret(proc, "rel-written.conf", "rel-written-8b4");
    await h.putSpec(proc, [["abs-written.conf", "/platform/app/rel-written.conf"]]);
    const ref = await h.container(proc);
    const marker = await h.until("marker", () => h.marker(ref.id));
    expect(marker.error).toBeUndefined();
    expect(marker.files.map((f) => f.path)).toEqual(["abs-written.conf", "/platform/app/rel-written.conf"]);
    expect(await readFileOf(ref, "/platform/app/abs-written.conf")).toMatchObject({ content: "abs-written-6d2" });
    expect(await readFileOf(ref, "/platform/app/rel-written.conf")).toMatchObject({ content: "rel-written-8b4" });
    // The PodGroup controller's gate reads that marker as covering the listed paths.
    const { secretsNotReady } = await import("../../../controllers/podgroup/secret-marker.ts");
    expect(secretsNotReady({ containerId: ref.id, podGroup: proc, paths: marker.files.map((f) => f.path), error: undefined }, proc, ["abs-written.conf", "/platform/app/rel-written.conf"])).toBeUndefined();
  });

  it("never replaces a directory of the image with a secret file: error marker, directory intact", async () => {
    const proc = h.proc("dir");
    await putSecret(proc, "/etc", "not a directory");
    await h.putSpec(proc, [["/etc"]]);
    const ref = await h.container(proc);
    const marker = await h.until("error marker", () => h.marker(ref.id));
    expect(marker.files).toEqual([]);
    expect(marker.error).toMatch(new RegExp(`^secret files of ${proc.replace(/\./g, "\\.")} cannot be installed: `));
    await h.cluster.start(ref);
    expect(await exec(ref, "test -d /etc && test -f /etc/passwd && echo intact")).toBe("intact\n");
  });

  it("installs nothing while the vault is sealed, and everything pending once it is unsealed", async () => {
    const proc = h.proc("sealed");
    await putSecret(proc, "s.txt", "sealed-content", "444"); // written before: a sealed service takes no writes
    await h.seal();
    try {
      await h.putSpec(proc, [["s.txt"]]);
      const ref = await h.container(proc);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await h.marker(ref.id)).toBeUndefined();
      expect(await readFileOf(ref, "/platform/app/s.txt")).toBeUndefined();

      await h.unseal();
      await h.until("marker after unseal", () => h.marker(ref.id), 5_000);
      expect(await readFileOf(ref, "/platform/app/s.txt")).toEqual({ uid: 0, gid: 0, mode: 0o444, content: "sealed-content" });
    } finally {
      await h.unseal();
    }
  });

  it("installs per container index, and deletes the marker of a removed container", async () => {
    const proc = h.proc("gc");
    await putSecret(proc, "first", "1");
    await putSecret(proc, "second", "2");
    await h.putSpec(proc, [["first"], ["second"]]);
    const c0 = await h.container(proc, "n1", 0);
    const c1 = await h.container(proc, "n1", 1);
    const m0 = await h.until("marker of container 0", () => h.marker(c0.id));
    const m1 = await h.until("marker of container 1", () => h.marker(c1.id));
    expect(m0.files.map((f) => f.path)).toEqual(["first"]);
    expect(m1.files.map((f) => f.path)).toEqual(["second"]);
    expect(await readFileOf(c0, "/platform/app/second")).toBeUndefined();

    await h.cluster.remove(c0, { force: true });
    await h.until("marker of the removed container deleted", async () => (await h.marker(c0.id)) === undefined, 10_000);
    expect(await h.marker(c1.id)).toBeDefined();
  });
  it("after a restart, a new controller finds every marker current and uploads nothing", async () => {
    const proc = h.proc("restart");
    await putSecret(proc, "r.txt", "restart-content-7d1");
    await h.putSpec(proc, [["r.txt"]]);
    const ref = await h.container(proc);
    await h.cluster.start(ref);
    const before = await h.until("marker", () => h.marker(ref.id));
    await h.stopController();
    const uploads = h.uploads(ref.id);
    expect(uploads).toBeGreaterThan(0);
    await h.startController();
    await new Promise((r) => setTimeout(r, 1_500));
    expect(h.uploads(ref.id)).toBe(uploads);
    expect((await h.marker(ref.id))?.at).toBe(before.at);
    // ...and it still acts on a change.
    await putSecret(proc, "r.txt", "restart-content-8e2");
    await h.until("change after restart", async () => (await exec(ref, "cat /platform/app/r.txt")) === "restart-content-8e2", 10_000);
  });

  it("putArchive: a missing container is NotFoundError; an aborted call rejects with the reason", async () => {
    const tar = await buildTar([{ path: "/x", content: "x", mode: 0o400, uid: 0, gid: 0 }]);
    await expect(h.cluster.putArchive({ node: "n1", id: "no-such-container-ss" }, "/", tar)).rejects.toBeInstanceOf(NotFoundError);
    const proc = h.proc("abort");
    const ref = await h.container(proc);
    const reason = new Error("stop now");
    await expect(h.cluster.putArchive(ref, "/", tar, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it("logged no secret content", () => {
    expect(h.logLines.length).toBeGreaterThan(0);
    expect(h.logLines.join("\n")).toContain("secret files installed");
    // Contents of 8+ characters cannot occur in a log line by chance; checked raw and JSON-escaped.
    const distinctive = contents.filter((c) => c.length >= 8);
    expect(distinctive.length).toBeGreaterThanOrEqual(6);
    for (const c of distinctive) expect(h.logLines.filter((l) => l.includes(c) || l.includes(JSON.stringify(c).slice(1, -1)))).toEqual([]);
  });
});
