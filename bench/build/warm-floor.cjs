// The least a warm `capstan build` can be as a Node program (bench/build.ts's floor leg): Node's
// own modules only, no YAML parser, no schema, no Docker client, no bundle. It reads every file
// of the source directory and hashes them (sha256), asks the engine for the base image (its ID is
// part of the build key), then for the images labelled with the key (GET /images/json), as the
// cache lookup does. It does less than a warm build (no definition parsed or checked, no ignore
// file, no tar of the source): a lower bound. CommonJS, so that not even Node's ES module loader
// starts.
//
//   node bench/build/warm-floor.cjs SOURCE_DIR unix:///path/to/docker.sock BASE_IMAGE
"use strict";
const { readFileSync, readdirSync } = require("node:fs");
const { createHash } = require("node:crypto");
const { join } = require("node:path");
const http = require("node:http");

const [dir, engine, base] = process.argv.slice(2);
const socketPath = new URL(engine).pathname;

/** GET `path` from the engine: its JSON answer. */
function get(path) {
  return new Promise((resolve, reject) => {
    const request = http.get({ socketPath, path, timeout: 10_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`${path}: the engine answered ${res.statusCode}: ${body}`))));
    });
    request.on("timeout", () => request.destroy(new Error(`${path}: no answer from the engine within 10 s`)));
    request.on("error", reject);
  });
}

function hashTree(hash, root) {
  for (const entry of readdirSync(root, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(root, entry.name);
    hash.update(path);
    if (entry.isDirectory()) hashTree(hash, path);
    else hash.update(readFileSync(path));
  }
}

(async () => {
  const hash = createHash("sha256");
  hashTree(hash, dir);
  const image = await get(`/images/${encodeURIComponent(base)}/json`);
  hash.update(image.Id);
  const filters = encodeURIComponent(JSON.stringify({ label: [`capstan.build.key=${hash.digest("hex")}`] }));
  const found = await get(`/images/json?filters=${filters}`);
  if (!Array.isArray(found)) throw new Error("the engine's image list is not a list");
})().catch((e) => {
  process.stderr.write(`warm-floor: ${e.message}\n`);
  process.exitCode = 1;
});
