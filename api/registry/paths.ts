// distribution's on-disk layout lives in api/resources/registry-paths.ts (the garbage collector, a
// controller, uses it too: docs/development.md, "Conventions"); re-exported for the registry's modules.
export * from "../resources/registry-paths.ts";
