// The application definition file (docs/deploy.md, "The application definition file") and the PodGroup it deploys.
export {
  AppDefinitionError,
  parseAppDefinition,
  secretFileProblem,
  type AppDefinition,
  type CopyEntry,
  type ParsedAppDefinition,
  type WebProc,
} from "./definition.ts";
export { webPodGroup, webProcFullName, webProcName, type WebPodGroupOptions } from "./podgroup.ts";
