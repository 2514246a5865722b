import { defineConfig } from "vitest/config";

// Integration tests share one etcd and the Docker engines started by scripts/services, so test
// files run one at a time (fileParallelism: false); each file namespaces its keys and containers.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
  },
});
