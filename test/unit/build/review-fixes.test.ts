// The decisions behind the build fixes (docs/build.md): release.copy paths, image tags, the git
// tag of a source with git-ignored files, the failure marker and
// UTF-8 split across output chunks.
import { describe, expect, it } from "vitest";
import { textSink } from "../../../adapters/build/docker.ts";
import {
  BuildError,
  checkTag,
  copyPaths,
  gitNamesSource,
  isValidTag,
  markerHoldFrom,
  prepareTag,
  scriptWrapper,
  withoutMarker,
} from "../../../adapters/build/plan.ts";

const thrown = (f: () => unknown): BuildError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(BuildError);
    return e as BuildError;
  }
  throw new Error("no error");
};

describe("release.copy paths", () => {
  it("normalizes what getArchive would name so that nothing matched", () => {
    expect(copyPaths({ src: ".", dest: "/srv/app" })).toEqual({ src: "/platform/app", dest: "/srv/app" });
    expect(copyPaths({ src: "dist/.", dest: "/srv/./www/" })).toEqual({ src: "/platform/app/dist", dest: "/srv/www" });
    expect(copyPaths({ src: "a/../b//c", dest: "out" })).toEqual({ src: "/platform/app/b/c", dest: "/platform/app/out" });
    expect(copyPaths({ src: "/opt/tools/..", dest: "/x" })).toEqual({ src: "/opt", dest: "/x" });
  });

  it("refuses a relative path leaving the app directory, and the root, naming the field", () => {
    expect(thrown(() => copyPaths({ src: "..", dest: "/srv" }, 2)).message).toMatch(/^release\.copy\[2\]\.src: "\.\." is outside \/platform\/app/);
    expect(thrown(() => copyPaths({ src: "a/../../etc", dest: "/srv" })).message).toMatch(/^release\.copy\[0\]\.src: .* outside/);
    expect(thrown(() => copyPaths({ src: "/", dest: "/srv" })).message).toMatch(/^release\.copy\[0\]\.src: "\/" is the root directory/);
    expect(thrown(() => copyPaths({ src: "/..//.", dest: "/srv" })).message).toMatch(/root directory/);
    expect(thrown(() => copyPaths({ src: "x", dest: "/" }, 1)).message).toMatch(/^release\.copy\[1\]\.dest: "\/" is the root directory/);
    expect(thrown(() => copyPaths({ src: "x", dest: "../y" }, 1)).message).toMatch(/^release\.copy\[1\]\.dest: .* outside/);
    expect(thrown(() => copyPaths({ src: "", dest: "/y" })).message).toMatch(/^release\.copy\[0\]\.src: "" is not a path/);
  });
});

describe("image tags", () => {
  it("follows the OCI tag grammar: never empty, at most 128, no leading . or -", () => {
    for (const ok of ["build-20260101000000-0123456789ab", "_x", "A.b-c_9", "x".repeat(128)]) expect(isValidTag(ok)).toBe(true);
    for (const bad of ["", ".x", "-x", "a:b", "a/b", "a b", "x".repeat(129)]) expect(isValidTag(bad)).toBe(false);
    expect(thrown(() => checkTag("", "push of r/app")).message).toBe('push of r/app: "" is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9._-], at most 128 characters)');
  });

  it("refuses a prepare.version that makes a bad tag, naming the key", () => {
    expect(prepareTag("1.2", new Date(0))).toBe("prepare-1.2-19700101000000");
    expect(thrown(() => prepareTag("1 beta", new Date(0))).message).toMatch(/^build\.prepare\.version \(in the prepare image's tag\): "prepare-1 beta-/);
  });

  it("names a build by its git commit only when no file sent is git-ignored", () => {
    expect(gitNamesSource(["a.txt", "src", "src/x.ts"], [])).toBe(true);
    expect(gitNamesSource(["a.txt", "src", "src/x.ts"], ["node_modules/", "x.log"])).toBe(true);
    expect(gitNamesSource(["a.txt", "x.log"], ["x.log"])).toBe(false);
    expect(gitNamesSource(["a.txt", "dist", "dist/app.js"], ["dist/"])).toBe(false);
    expect(gitNamesSource(["distribution"], ["dist/"])).toBe(true);
  });
});

describe("script runs", () => {
  it("holds back a failure marker split across chunks, so none of it is shown", () => {
    const [marker] = /@@\S+/.exec(scriptWrapper(["false"]))!;
    const stderr = `warning: x\n${marker} 1 1\n`;
    // Every way of cutting the stream in two shows the same text: the warning, no marker.
    for (let cut = 0; cut <= stderr.length; cut++) {
      let held = "";
      let shown = "";
      for (const chunk of [stderr.slice(0, cut), stderr.slice(cut)]) {
        held += chunk;
        const at = markerHoldFrom(held);
        shown += withoutMarker(held.slice(0, at));
        held = held.slice(at);
      }
      shown += withoutMarker(held);
      expect(shown, `cut at ${cut}`).toBe("warning: x\n");
    }
    expect(markerHoldFrom("mail me@example.com\n")).toBe(20);
  });

  it("decodes UTF-8 split across chunks whole", () => {
    const bytes = Buffer.from("héllo → ✓\n");
    for (let cut = 0; cut <= bytes.length; cut++) {
      let text = "";
      const sink = textSink((t) => (text += t));
      sink.write(bytes.subarray(0, cut));
      sink.write(bytes.subarray(cut));
      sink.flush();
      expect(text, `cut at ${cut}`).toBe("héllo → ✓\n");
    }
  });
});
