// A registry's refusal or failure as the build commands report it: one line, exit 1 (docs/build.md).
// Its own module, so that what only needs to recognise one (`capstan build`'s failure report)
// does not load the registry client and its HTTP stack.
export class RegistryError extends Error {
  override readonly name = "RegistryError";
}
