// The registry's storage drivers (docs/registry.md, "Filesystem storage", "S3 storage"): the interface and its drivers.
export { checkPath, InvalidPathError, PathNotFoundError, type FileInfo, type FileWriter, type StorageDriver } from "./driver.ts";
export { FilesystemDriver, type FilesystemDriverOptions } from "./filesystem.ts";
