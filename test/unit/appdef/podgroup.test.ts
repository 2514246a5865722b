import { describe, expect, it } from "vitest";
import { parseAppDefinition, webPodGroup, webProcFullName } from "../../../api/appdef/index.ts";
import { PodGroupSpecInput } from "../../../api/resources/podgroup.ts";

const def = parseAppDefinition("appname: hello\nweb:\n  cmd: exec httpd -f -p $PORT\n  secret_files: [config.yaml, /etc/key]\n", "app.yaml").definition;

describe("web PodGroup of a definition", () => {
  it("is <app>.web.web in namespace <app>, running web.cmd under sh with PORT and the secret files", () => {
    const spec = webPodGroup(def, { image: "capstan/busybox:latest", port: 8080, instances: 1, network: "none" });
    expect(spec).toEqual({
      name: "hello.web.web",
      namespace: "hello",
      numInstances: 1,
      restartPolicy: "always",
      pod: {
        namespace: "hello",
        network: "none",
        containers: [
          { image: "capstan/busybox:latest", command: ["sh", "-c", "exec httpd -f -p $PORT"], env: ["PORT=8080"], secretFiles: ["config.yaml", "/etc/key"] },
        ],
      },
    });
    // what the orchestrator's API accepts
    expect(PodGroupSpecInput.safeParse(spec).success).toBe(true);
    expect(webProcFullName("hello")).toBe("hello.web.web");
  });

  it("publishes the port when the proc has a network, and lists no secret files when there are none", () => {
    const bare = parseAppDefinition("appname: a\nweb:\n  cmd: run\n", "f").definition;
    const spec = webPodGroup(bare, { image: "i", port: 9000, instances: 3 });
    expect(spec.numInstances).toBe(3);
    expect(spec.pod.network).toBeUndefined();
    expect(spec.pod.containers[0]).toEqual({ image: "i", command: ["sh", "-c", "run"], env: ["PORT=9000"], expose: 9000 });
  });

  it("refuses a definition without a web proc", () => {
    expect(() => webPodGroup({ appname: "a", notify: {} }, { image: "i", port: 1, instances: 1 })).toThrow(/no web proc/);
  });
});
