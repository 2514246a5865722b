// Argument checks of the issue-5 client commands: each bad command line is a UsageError (exit code
// 2 from main) that says what is wrong, raised before any request is made or file is read.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { run as apps } from "../../../cli/commands/apps.ts";
import { run as deploy } from "../../../cli/commands/deploy.ts";
import { run as secret } from "../../../cli/commands/secret.ts";
import { run as secrets } from "../../../cli/commands/secrets.ts";
import { run as tokens } from "../../../cli/commands/tokens.ts";
import { UsageError } from "../../../cli/options.ts";

describe("issue-5 command lines", () => {
  it.each([
    ["secret", secret, ["show2"], 'unknown sub-command "show2": use add, view or delete'],
    ["secret", secret, ["add", "prod", "hello.web.web"], "PATH is required, e.g. capstan secret add prod hello.web.web config.yaml -c VALUE"],
    ["secret", secret, ["add", "prod", "hello.web.web", "p"], "give the content with exactly one of -c CONTENT or -f FILE"],
    ["secret", secret, ["add", "prod", "hello.web.web", "p", "-c", "x", "-f", "y"], "give the content with exactly one of -c CONTENT or -f FILE"],
    ["secret", secret, ["add", "prod", "hello.web.web", "p", "-c", "x", "-mode", "644x"], '-mode: "644x" is not an octal file mode like 400 or 0640'],
    ["secret", secret, ["add", "prod", "hello", "p", "-c", "x"], 'proc "hello" must be <app>.<type>.<proc_name>, e.g. hello.web.web'],
    ["secret", secret, ["view", "prod"], "PROC is required, e.g. capstan secret view prod hello.web.web"],
    ["secret", secret, ["view", "prod", "hello.web.web", "-o", "yaml"], '-output: "yaml" is not table or json'],
    ["secret", secret, ["delete", "prod", "hello.web.web", "p", "extra"], 'unexpected argument "extra"'],
    ["deploy", deploy, [], "CLUSTER is required, e.g. capstan deploy prod -f app.yaml -image hello:1"],
    ["deploy", deploy, ["prod", "-f", "app.yaml", "-image", "i", "-release", "release-20260101000000-0123456789ab"], "-image and -release: give one of them"],
    ["deploy", deploy, ["prod", "-image", "i", "-instances", "1001"], "-instances: 1001 must be 0..1000"],
    ["apps", apps, ["add", "prod", "hello"], "at least one -maintainer E-MAIL is required"],
    ["apps", apps, ["add", "prod", "hello", "-maintainer"], "option -maintainer needs a value"],
    ["apps", apps, ["remove"], 'unknown sub-command "remove": use add, list or maintainers'],
    ["apps", apps, ["maintainers", "set"], 'unknown sub-command "maintainers set": use maintainers add or maintainers remove'],
    ["apps", apps, ["maintainers", "add", "prod", "hello"], "CLUSTER, APP and at least one E-MAIL are required, e.g. capstan apps maintainers add prod hello carol@example.com"],
    ["apps", apps, ["maintainers", "remove", "prod", "hello", ","], "at least one E-MAIL is required"],
    ["apps", apps, ["list", "-o", "yaml"], '-output: "yaml" is not table or json'],
    ["tokens", tokens, ["list", "-o", "yaml"], '-output: "yaml" is not table or json'],
    ["tokens", tokens, ["create", "prod"], "-user is required"],
    ["tokens", tokens, ["create", "prod", "-user", "a@b.c", "-role", "root"], '-role: "root" is not user, viewer, sync or admin'],
    ["tokens", tokens, ["create", "prod", "-user", "a@b.c", "-role", "viewer"], "-role viewer needs -apps APP,... (the apps the token may read)"],
    ["tokens", tokens, ["create", "prod", "-user", "a@b.c", "-apps", "shop"], "-apps is only for -role viewer (a user token's apps are not granted on the token)"],
    ["tokens", tokens, ["create", "prod", "-user", "a@b.c", "-role", "viewer", "-apps", " , "], "-apps: no app names (give APP,APP...)"],
    ["tokens", tokens, ["remove"], 'unknown sub-command "remove": use create, list or revoke'],
    ["secrets", secrets, ["init", "-shares", "2", "-threshold", "3"], "-threshold: 3 must be 1..2 (-shares)"],
    ["secrets", secrets, ["init", "-shares", "0"], "-shares: 0 must be 1..255"],
    ["secrets", secrets, ["status", "a", "b"], 'unexpected argument "b"'],
    ["secrets", secrets, ["init", "-unseal-key-file", "package.json"], "-unseal-key-file: package.json exists already; give a new file"],
  ] as const)("%s %j: %s", async (_name, command, argv, message) => {
    await expect(command([...argv])).rejects.toThrow(new UsageError(message));
  });
});

describe("secret add -f", () => {
  it("refuses a file that is not UTF-8 text before contacting anything", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-secret-"));
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      const file = join(dir, "key.bin");
      writeFileSync(file, Buffer.from([0xff, 0xfe, 0x00, 0x80]));
      expect(await secret(["add", "nowhere", "hello.web.web", "key.bin", "-f", file])).toBe(1);
      expect(String(stderr.mock.calls[0]?.[0])).toBe(`capstan secret add: -f ${file}: not UTF-8 text; secret contents are text (encode binary data, e.g. base64, and decode it in the app)\n`);
    } finally {
      stderr.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
