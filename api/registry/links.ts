// The registry's links (and the repository walk) live in api/resources/registry-storage.ts (the
// garbage collector, a controller, uses them too: docs/development.md, "Conventions");
// re-exported for the registry's modules.
export { byCodeUnit, Links } from "../resources/registry-storage.ts";
