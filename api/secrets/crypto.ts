// Encryption at rest: AES-256-GCM under the master key, a fresh random 96-bit nonce per write (NIST
// SP 800-38D's recommended nonce size; random nonces stay far below the 2^32 messages per key
// bound at this service's write rates), and the record's address as associated data, so a value
// copied to another key (another app, proc or path) fails authentication instead of decrypting.
//
// Stored form: "v1." + base64(nonce 12 bytes || ciphertext || tag 16 bytes). The version prefix
// lets a later format (or key rotation) coexist with this one.
import { createCipheriv, createDecipheriv, randomFillSync } from "node:crypto";

export const masterKeyBytes = 32;
const nonceBytes = 12;
const tagBytes = 16;
const prefix = "v1.";

/** The ciphertext did not authenticate: wrong key, tampered value, or a value moved to another address. */
export class DecryptError extends Error {
  override readonly name = "DecryptError";
}

// Nonces are drawn from a pool of random bytes refilled 4 KiB at a time: one call into the CSPRNG
// per 341 writes instead of one per write (a profile of PUT under load put the per-call cost at
// about 2 % of the service's CPU). Invariant: every 12-byte slice is handed out once, then the pool
// is refilled; a slice is as random as a nonce drawn alone (nonces are public, stored in the clear).
const noncePool = Buffer.alloc(nonceBytes * 341);
let noncePoolUsed = noncePool.length;

/** A fresh nonce: a view into the pool, valid until the next call (encrypt uses it synchronously). */
function nextNonce(): Buffer {
  if (noncePoolUsed + nonceBytes > noncePool.length) {
    randomFillSync(noncePool);
    noncePoolUsed = 0;
  }
  const nonce = noncePool.subarray(noncePoolUsed, noncePoolUsed + nonceBytes);
  noncePoolUsed += nonceBytes;
  return nonce;
}

/** Encrypts `plaintext` (one buffer, or parts that form it in order) into the stored form. */
export function encrypt(key: Buffer, aad: string, plaintext: Buffer | readonly Buffer[]): string {
  const nonce = nextNonce();
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(aad, "utf8"));
  // One join of nonce, ciphertext parts and tag: every copy of a large record is felt in the
  // service's CPU per PUT (allocation and GC), bench:secrets 16 KiB.
  const out = [nonce];
  for (const part of Buffer.isBuffer(plaintext) ? [plaintext] : plaintext) out.push(cipher.update(part));
  out.push(cipher.final(), cipher.getAuthTag());
  return prefix + Buffer.concat(out).toString("base64");
}

export function decrypt(key: Buffer, aad: string, value: string): Buffer {
  if (!value.startsWith(prefix)) throw new DecryptError("unknown ciphertext format");
  const raw = Buffer.from(value.slice(prefix.length), "base64");
  if (raw.length < nonceBytes + tagBytes) throw new DecryptError("ciphertext too short");
  const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, nonceBytes), { authTagLength: tagBytes });
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(raw.subarray(raw.length - tagBytes));
  try {
    return Buffer.concat([decipher.update(raw.subarray(nonceBytes, raw.length - tagBytes)), decipher.final()]);
  } catch {
    throw new DecryptError("ciphertext does not authenticate");
  }
}
