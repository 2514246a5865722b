// The secrets service (docs/secrets.md). Server assembly: createSecretsService gives the Hono app and the
// Vault (seal state); the Secret-sync controller in the same process reads records through
// readSecrets and starts/stops on vault.onUnseal/onSeal.
export { createSecretsService, type SecretsService, type SecretsServiceOptions } from "./api.ts";
export { DecryptError } from "./crypto.ts";
export { readSecret, readSecrets, SecretIntegrityError, type SecretEntry } from "./read.ts";
export { aadOf, appSecretsPrefix, parseSecretKey, procSecretsPrefix, secretKey, secretsPrefix, sysKeys, sysPrefix, type SecretRecord } from "./record.ts";
export { SealedError, Vault, VaultStateError, type SealConfig, type VaultStatus } from "./vault.ts";
export { autoUnseal, rootTokenFileOf, type AutoUnsealOptions, type AutoUnsealOutcome } from "./auto-unseal.ts";
export { SealStatusPublisher, sealStatusKey } from "./seal-status.ts";
export { readUnsealFile, UnsealFileError, unsealFileProblem, writeUnsealFile } from "./unseal-file.ts";
