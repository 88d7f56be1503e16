// Model files kept across visits, in the origin private file system (OPFS;
// ARCHITECTURE.md says why not Cache Storage). The engine owns one folder,
// `readout-files-v1`, and touches nothing outside it; inside, one folder per
// entry (its key, encoded), and per file its bytes and, written after them,
// a `<name>.meta.json` (size, sha256, url, when). A file is streamed under a
// temporary name, checked by the engine, and only then moved under its real
// name, so a file without its metadata is never read. The engine decides
// what to keep and checks what it reads (src/bindings/kept.rs); this file
// only moves bytes.
const ROOT = "readout-files-v1";
const META = ".meta.json";
const TMP = ".tmp-";
// A temporary file older than this was left by a page that closed mid-write.
const STALE_MS = 10 * 60 * 1000;

/** An error whose `code` says storage cannot be used here, and why in words. */
function unavailable(why) {
  return Object.assign(new Error(why), { code: "storage_unavailable" });
}

// Names inside the folder: every character but letters, digits, "-" and "_"
// is escaped, so a key never names "." or ".." or a path.
const encode = (key) => [...new TextEncoder().encode(key)].map((b) => (/[A-Za-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, "0")}`)).join("");
const decode = (name) => decodeURIComponent(name);

async function root(create) {
  const storage = globalThis.navigator?.storage;
  if (typeof storage?.getDirectory !== "function") throw unavailable("this runtime has no origin private file system (navigator.storage.getDirectory)");
  let top;
  try {
    top = await storage.getDirectory();
  } catch (e) {
    throw unavailable(`the origin private file system refused: ${e?.message ?? e}`);
  }
  try {
    return await top.getDirectoryHandle(ROOT, { create });
  } catch (e) {
    if (!create && e?.name === "NotFoundError") return null;
    throw e;
  }
}

async function entryDir(entry, create) {
  const r = await root(create);
  if (!r) return null;
  try {
    return await r.getDirectoryHandle(encode(entry), { create });
  } catch (e) {
    if (!create && e?.name === "NotFoundError") return null;
    throw e;
  }
}

async function readText(dir, name) {
  try {
    return await (await (await dir.getFileHandle(name)).getFile()).text();
  } catch (e) {
    if (e?.name === "NotFoundError") return null;
    throw e;
  }
}

async function removeQuietly(dir, name) {
  try {
    await dir.removeEntry(name);
  } catch (e) {
    if (e?.name !== "NotFoundError") throw e;
  }
}

// The stored file `file` of `entry`: `{ meta, blob }` (`blob` null when the
// bytes are gone), or null when nothing complete is stored.
async function storedFile(entry, file) {
  const dir = await entryDir(entry, false);
  if (!dir) return null;
  const meta = await readText(dir, encode(file) + META);
  if (meta === null) return null;
  try {
    return { meta, blob: await (await dir.getFileHandle(encode(file))).getFile() };
  } catch (e) {
    if (e?.name === "NotFoundError") return { meta, blob: null };
    throw e;
  }
}

/**
 * The stored file `file` of `entry`: `{ meta, size, body }` (`meta` the JSON
 * written at commit, `size` the bytes on disk, `body` a stream of them), or
 * null when nothing complete is stored.
 */
export async function storeRead(entry, file) {
  const got = await storedFile(entry, file);
  if (!got) return null;
  return { meta: got.meta, size: got.blob?.size ?? -1, body: got.blob?.stream() ?? null };
}

/**
 * The stored file `file` of `entry` read whole: `{ meta, size, bytes }`
 * (`bytes` a Uint8Array, or null when the file is gone or over `maxBytes`,
 * which is checked before it is read), or null when nothing complete is
 * stored. For a kept prefix, which the engine checks whole before it uses
 * any of it.
 */
export async function storeReadBytes(entry, file, maxBytes) {
  const got = await storedFile(entry, file);
  if (!got) return null;
  const size = got.blob?.size ?? -1;
  const fits = got.blob && size <= maxBytes;
  return { meta: got.meta, size, bytes: fits ? new Uint8Array(await got.blob.arrayBuffer()) : null };
}

/** Removes the stored file `file` of `entry` (its metadata first, so a half-removed file is never read). */
export async function storeRemove(entry, file) {
  const dir = await entryDir(entry, false);
  if (!dir) return;
  await removeQuietly(dir, encode(file) + META);
  await removeQuietly(dir, encode(file));
}

/**
 * Starts writing `file` of `entry` under a temporary name: `{ write(chunk),
 * commit(metaJson), abort() }`, each a promise. `commit` moves the bytes
 * under the real name and then writes the metadata; `abort` leaves nothing.
 */
export async function storeBegin(entry, file) {
  const dir = await entryDir(entry, true);
  // Temporary files a closed page left behind (not one another tab is writing now).
  for await (const [name, handle] of dir.entries()) {
    if (!name.includes(TMP) || handle.kind !== "file") continue;
    const f = await handle.getFile().catch(() => null);
    if (f && Date.now() - f.lastModified > STALE_MS) await removeQuietly(dir, name);
  }
  const tmp = `${encode(file)}${TMP}${Math.random().toString(36).slice(2)}`;
  const handle = await dir.getFileHandle(tmp, { create: true });
  let writable;
  try {
    writable = await handle.createWritable();
  } catch (e) {
    await removeQuietly(dir, tmp);
    throw e;
  }
  let open = true;
  const abort = async () => {
    if (open) {
      open = false;
      await writable.abort().catch(() => {});
    }
    // The writer's lock on the file can outlast abort() by a moment (Chromium
    // refuses the removal meanwhile), so the removal is tried again.
    for (let tries = 0; ; tries++) {
      try {
        await removeQuietly(dir, tmp);
        return;
      } catch (e) {
        if (tries >= 20) throw e;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  return {
    // The error's name (QuotaExceededError, say) is what a caller needs to read.
    write: (chunk) => writable.write(chunk).catch((e) => {
      throw new Error(`${e?.name ?? "Error"}: ${e?.message ?? e}`);
    }),
    abort,
    commit: async (meta) => {
      try {
        open = false;
        await writable.close();
        // The old metadata goes first: between the two steps no stale
        // metadata describes the new bytes.
        await removeQuietly(dir, encode(file) + META);
        await removeQuietly(dir, encode(file));
        await handle.move(encode(file));
        const m = await (await dir.getFileHandle(encode(file) + META, { create: true })).createWritable();
        await m.write(meta);
        await m.close();
      } catch (e) {
        await abort();
        await removeQuietly(dir, encode(file));
        throw e;
      }
    },
  };
}

/** Asks once per page for persistent storage; resolves with the browser's answer, or null where there is no such request. */
let persisted = null;
export function storePersist() {
  persisted ??= typeof globalThis.navigator?.storage?.persist === "function"
    ? navigator.storage.persist().catch(() => false)
    : Promise.resolve(null);
  return persisted;
}

/** What the engine has stored: `[{ entry, file, bytes, storedAt }]`, only complete files. */
export async function stored() {
  const r = await root(false);
  if (!r) return [];
  const out = [];
  for await (const [dirName, dir] of r.entries()) {
    if (dir.kind !== "directory") continue;
    for await (const [name] of dir.entries()) {
      if (!name.endsWith(META)) continue;
      const meta = JSON.parse((await readText(dir, name)) ?? "null");
      if (!meta) continue;
      out.push({ entry: decode(dirName), file: decode(name.slice(0, -META.length)), bytes: meta.bytes, storedAt: meta.storedAt, sha256: meta.sha256 ?? null });
    }
  }
  return out.sort((x, y) => (x.entry + x.file).localeCompare(y.entry + y.file));
}

/** Deletes every stored file of `entry` (a models.json entry's key, as `stored()` lists it); resolves with how many files went. */
export async function deleteStored(entry) {
  const r = await root(false);
  if (!r) return 0;
  const dir = await entryDir(entry, false);
  if (!dir) return 0;
  let n = 0;
  for await (const [name] of dir.entries()) if (name.endsWith(META)) n++;
  await r.removeEntry(encode(entry), { recursive: true });
  return n;
}

/** Deletes everything the engine stored (its own folder only; the origin's other files stay). */
export async function clearStored() {
  const top = globalThis.navigator?.storage?.getDirectory ? await navigator.storage.getDirectory() : null;
  if (!top) return;
  try {
    await top.removeEntry(ROOT, { recursive: true });
  } catch (e) {
    if (e?.name !== "NotFoundError") throw e;
  }
}
