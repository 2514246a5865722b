// The registry's name grammar lives in api/resources/registry-names.ts (the garbage collector, a
// controller, uses it too: docs/development.md, "Conventions"); re-exported for the registry's modules.
export * from "../resources/registry-names.ts";
