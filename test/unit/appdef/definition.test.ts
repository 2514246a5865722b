import { describe, expect, it } from "vitest";
import { AppDefinitionError, parseAppDefinition } from "../../../api/appdef/index.ts";

const full = `appname: hello
build:
  base: capstan/busybox:latest
  script:
    - make
    - make test
release:
  dest_base: capstan/busybox:latest
  copy:
    - src: bin/hello
      dest: /usr/bin/hello
test:
  script: [make check]
web:
  cmd: exec httpd -f -p $PORT
  port: 8080
  secret_files:
    - config/secret.yaml
    - /etc/hello/key.pem
notify:
  slack: "#hello"
`;

function problems(text: string): string[] {
  try {
    parseAppDefinition(text, "app.yaml");
  } catch (e) {
    expect(e).toBeInstanceOf(AppDefinitionError);
    return (e as AppDefinitionError).problems;
  }
  throw new Error("expected the definition to be refused");
}

describe("application definition", () => {
  it("reads every field of the definition file (docs/deploy.md)", () => {
    const { definition, warnings } = parseAppDefinition(full, "app.yaml");
    expect(warnings).toEqual([]);
    expect(definition).toEqual({
      appname: "hello",
      build: { base: "capstan/busybox:latest", script: ["make", "make test"] },
      release: { destBase: "capstan/busybox:latest", copy: [{ src: "bin/hello", dest: "/usr/bin/hello" }] },
      test: { script: ["make check"] },
      web: { cmd: "exec httpd -f -p $PORT", port: 8080, secretFiles: ["config/secret.yaml", "/etc/hello/key.pem"] },
      notify: { slack: "#hello" },
    });
  });

  it("needs only appname; a web proc without port leaves it to the deployer", () => {
    expect(parseAppDefinition("appname: a\n", "f").definition).toEqual({ appname: "a", notify: {} });
    expect(parseAppDefinition("appname: a\nweb:\n  cmd: run\n", "f").definition.web).toEqual({ cmd: "run", port: undefined, secretFiles: [] });
  });

  it("names the line and key of a bad value", () => {
    expect(problems(full.replace("port: 8080", "port: 70000"))).toEqual(["app.yaml:16: web.port: must be an integer 1..65535"]);
    expect(problems(full.replace("port: 8080", 'port: "8080"'))).toEqual(["app.yaml:16: web.port: must be an integer 1..65535"]);
    expect(problems(full.replace("port: 8080", "port: 80.5"))).toEqual(["app.yaml:16: web.port: must be an integer 1..65535"]);
    expect(problems(full.replace("appname: hello", "appname: Hello.World"))).toEqual([
      expect.stringMatching(/^app\.yaml:1: appname: "Hello.World" must be a lower-case DNS label/),
    ]);
    expect(problems(full.replace("    - make test", "    - {a: 1}"))).toEqual(["app.yaml:6: build.script[1]: must be a string"]);
    expect(problems(full.replace("      dest: /usr/bin/hello\n", ""))).toEqual(["app.yaml:10: release.copy[0].dest: required, but missing"]);
  });

  it("reads build.prepare (version and script), and names a bad or missing version at its line", () => {
    const text = "appname: a\nbuild:\n  base: b\n  prepare:\n    version: 2\n    script: [echo prep]\n  script: [make]\n";
    expect(parseAppDefinition(text, "f").definition.build).toEqual({ base: "b", script: ["make"], prepare: { version: "2", script: ["echo prep"] } });
    expect(problems(text.replace("version: 2", 'version: "a b"'))).toEqual(['app.yaml:5: build.prepare.version: "a b" must be 1..40 of A-Z, a-z, 0-9, "_", "." and "-" (it goes into an image tag)']);
    expect(problems(text.replace("    version: 2\n", ""))).toEqual(["app.yaml:4: build.prepare.version: required, but missing"]);
    expect(problems(text.replace("    version: 2\n", "    version: 2\n    scripts: [x]\n"))).toEqual([expect.stringMatching(/^app\.yaml:6: build\.prepare\.scripts: unknown key/)]);
  });

  it("refuses secret file paths with .. segments or NUL, and duplicates, at their line", () => {
    expect(problems(full.replace("- config/secret.yaml", "- ../etc/passwd"))).toEqual(['app.yaml:18: web.secret_files[0]: "../etc/passwd" must not contain ".." segments']);
    expect(problems(full.replace("- config/secret.yaml", '- "a\\0b"'))).toEqual(["app.yaml:18: web.secret_files[0]: must not contain NUL bytes"]);
    expect(problems(full.replace("- /etc/hello/key.pem", "- config/secret.yaml"))).toEqual(['app.yaml:19: web.secret_files[1]: "config/secret.yaml" is listed twice']);
    // "..." and "a..b" are ordinary names
    expect(parseAppDefinition("appname: a\nweb:\n  cmd: x\n  secret_files: [a..b, ...]\n", "f").definition.web?.secretFiles).toEqual(["a..b", "..."]);
  });

  it("refuses unknown keys inside a section, warns about unknown top-level keys", () => {
    const typo = problems(full.replace("  secret_files:", "  secret_file:"));
    expect(typo).toEqual(["app.yaml:17: web.secret_file: unknown key (known: cmd, port, secret_files)"]);
    const { warnings, definition } = parseAppDefinition(`${full}worker.cron:\n  cmd: x\n`, "app.yaml");
    expect(definition.appname).toBe("hello");
    expect(warnings).toEqual([expect.stringMatching(/^app\.yaml:22: worker\.cron: unknown key, ignored/)]);
  });

  it("reports missing required keys, wrong shapes and YAML syntax errors with lines", () => {
    expect(problems("web:\n  port: 80\n")).toEqual(["app.yaml:1: web.cmd: required, but missing", "app.yaml:1: appname: required, but missing"]);
    expect(problems("appname: a\nweb: run it\n")).toEqual(["app.yaml:2: web: must be a mapping"]);
    expect(problems("appname: a\nnotify:\n  slack: [x]\n")).toEqual(["app.yaml:3: notify.slack: must be a string"]);
    expect(problems("- a\n- b\n")).toEqual([expect.stringMatching(/^app\.yaml:1: the file must be a mapping/)]);
    expect(problems("appname: a\nappname: b\n")).toEqual([expect.stringMatching(/^app\.yaml:2: Map keys must be unique/)]);
    expect(problems("appname: [a\n")[0]).toMatch(/^app\.yaml:\d+: /);
  });
});
