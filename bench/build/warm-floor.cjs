// The least a warm `capstan build` can be as a Node program (bench/build.ts's floor leg): Node's
// own modules only, no YAML parser, no schema, no Docker client, no bundle. It reads the
// definition and every file of the source directory, hashes them (sha256) as a build key, and asks
// the engine once for the images labelled with it (GET /images/json), as the cache lookup does.
// CommonJS, so that not even Node's ES module loader starts.
//
//   node bench/build/warm-floor.cjs SOURCE_DIR unix:///path/to/docker.sock
"use strict";
const { readFileSync, readdirSync } = require("node:fs");
const { createHash } = require("node:crypto");
const { join } = require("node:path");
const http = require("node:http");

const [dir, engine] = process.argv.slice(2);
const hash = createHash("sha256");
for (const name of readdirSync(dir).sort()) hash.update(name).update(readFileSync(join(dir, name)));
const filters = encodeURIComponent(JSON.stringify({ label: [`capstan.build.key=${hash.digest("hex")}`] }));
const request = http.get({ socketPath: new URL(engine).pathname, path: `/images/json?filters=${filters}`, timeout: 10_000 }, (res) => {
  let body = "";
  res.setEncoding("utf8");
  res.on("data", (chunk) => (body += chunk));
  res.on("end", () => {
    if (res.statusCode !== 200 || !Array.isArray(JSON.parse(body))) {
      process.stderr.write(`warm-floor: the engine answered ${res.statusCode}: ${body}\n`);
      process.exitCode = 1;
    }
  });
});
request.on("timeout", () => request.destroy(new Error("no answer from the engine within 10 s")));
request.on("error", (e) => {
  process.stderr.write(`warm-floor: ${e.message}\n`);
  process.exitCode = 1;
});
