import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ManifestError, parseManifest, readManifest } from "../../../cli/manifest.ts";
import { UsageError } from "../../../cli/options.ts";
import { formatPath } from "../../../api/resources/issue-paths.ts";

const hello = `# two instances of a sleep loop
name: hello
namespace: demo
numInstances: 2
restartPolicy: always
pod:
  namespace: demo
  network: none
  containers:
    - image: capstan/busybox:latest
      command: ["/bin/sh", "-c", "while true; do sleep 1; done"]
`;

/** The problems of a manifest that must not parse. */
function problems(text: string, file = "g.yaml"): string[] {
  try {
    parseManifest(text, file);
  } catch (e) {
    expect(e).toBeInstanceOf(ManifestError);
    return (e as ManifestError).problems;
  }
  throw new Error("expected a ManifestError");
}

describe("parseManifest", () => {
  it("reads a YAML PodGroup into the API's canonical spec", () => {
    const [spec, ...rest] = parseManifest(hello, "hello.yaml");
    expect(rest).toEqual([]);
    expect(spec).toEqual({
      name: "hello",
      namespace: "demo",
      numInstances: 2,
      restartPolicy: "always",
      pod: { namespace: "demo", network: "none", containers: [{ image: "capstan/busybox:latest", command: ["/bin/sh", "-c", "while true; do sleep 1; done"] }] },
    });
  });

  it("reads JSON, including PascalCase keys and integer restart policy codes (docs/cli.md, capstan apply)", () => {
    const json = JSON.stringify(
      { Name: "web", Namespace: "demo", NumInstances: 1, RestartPolicy: 2, Pod: { Namespace: "demo", Containers: [{ Image: "img" }] } },
      null,
      "\t",
    );
    const [spec] = parseManifest(json, "web.json");
    expect(spec).toMatchObject({ name: "web", numInstances: 1, restartPolicy: "onfail", pod: { containers: [{ image: "img" }] } });
  });

  it("reads several groups separated by --- and skips empty documents", () => {
    const specs = parseManifest(`${hello}---\n---\n${hello.replace("name: hello", "name: hello2")}`, "two.yaml");
    expect(specs.map((s) => s.name)).toEqual(["hello", "hello2"]);
  });

  it("names the line and column of a YAML syntax error", () => {
    const [p, ...rest] = problems("name: a\nnamespace: [b\nnumInstances: 1\n");
    expect(rest.length).toBeGreaterThanOrEqual(0);
    expect(p).toMatch(/^g\.yaml:\d+:\d+: /);
    expect(problems("name: a\nname: b\n")[0]).toMatch(/^g\.yaml:2:1: Map keys must be unique/);
  });

  it("names the line of a JSON syntax error", () => {
    expect(problems('{\n  "name": "a",\n  "namespace": "b"\n  "numInstances": 1\n}', "g.json")[0]).toMatch(/^g\.json:4:\d+: /);
  });

  it("points a wrong value at its key's line, with the field path", () => {
    const text = hello.replace("numInstances: 2", "numInstances: -1");
    expect(problems(text)).toEqual([expect.stringMatching(/^g\.yaml:4:1: numInstances: .*(>=|at least|greater).*0/i)]);
  });

  it("points a bad value inside a list item at that item's field", () => {
    const text = hello.replace('command: ["/bin/sh"', 'command: [1, "/bin/sh"');
    expect(problems(text)).toEqual([expect.stringMatching(/^g\.yaml:11:17: pod\.containers\[0\]\.command\[0\]: .*expected string, received number/)]);
  });

  it("points an unknown field at that field, whatever its letter case", () => {
    const text = hello.replace("  network: none", "  network: none\n  Colour: blue");
    expect(problems(text)).toEqual([expect.stringMatching(/^g\.yaml:9:3: pod: Unrecognized key: "Colour"/)]);
  });

  it("points a missing field at the object that lacks it and reports every problem", () => {
    const text = "name: Bad_Name\nnamespace: demo\nnumInstances: 1\nrestartPolicy: sometimes\npod:\n  containers:\n    - command: [x]\n";
    expect(problems(text)).toEqual([
      expect.stringMatching(/^g\.yaml:1:1: name: must match/),
      expect.stringMatching(/^g\.yaml:4:1: restartPolicy: must be one of never, always, onfail/),
      "g.yaml:5:1: pod.namespace: required, but missing",
      "g.yaml:7:7: pod.containers[0].image: required, but missing",
    ]);
  });

  it("refuses a file without any PodGroup, and a document that is not a mapping", () => {
    expect(problems("# nothing here\n")).toEqual(["g.yaml: no PodGroup in the file"]);
    expect(problems("- a\n- b\n")[0]).toMatch(/^g\.yaml:1:1: /);
  });
});

describe("readManifest", () => {
  const dir = mkdtempSync(join(tmpdir(), "capstan-manifest-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads a file, or standard input for -", async () => {
    const path = join(dir, "hello.yaml");
    writeFileSync(path, hello);
    expect((await readManifest(path))[0]!.name).toBe("hello");
    expect((await readManifest("-", Readable.from([Buffer.from(hello)])))[0]!.name).toBe("hello");
  });

  it("reads examples/hello.yaml, the group scripts/up applies", async () => {
    const [spec] = await readManifest(fileURLToPath(new URL("../../../examples/hello.yaml", import.meta.url)));
    expect(spec).toMatchObject({ name: "hello", numInstances: 2, restartPolicy: "always", pod: { network: "none", containers: [{ image: "capstan/busybox:latest" }] } });
  });

  it("says a missing file is missing, naming -f and the path (a usage error)", async () => {
    await expect(readManifest(join(dir, "missing.yaml"))).rejects.toThrow(new UsageError(`-f ${join(dir, "missing.yaml")}: the file does not exist`));
    await expect(readManifest("no-such-dir/x.yaml")).rejects.toThrow(/^-f no-such-dir\/x\.yaml \(\/.*\/no-such-dir\/x\.yaml\): the file does not exist$/);
    await expect(readManifest(dir)).rejects.toThrow(/is a folder, not a file/);
  });
});

describe("formatPath", () => {
  it("writes paths the way the API's error details do (the manifest's root has no name)", () => {
    expect(formatPath(["pod", "containers", 0, "image"], "")).toBe("pod.containers[0].image");
    expect(formatPath([], "")).toBe("");
  });
});
