// `readout/storage`: what the engine keeps across visits (a models.json entry's files), listed and deleted.
export interface StoredFile {
  /** The models.json entry id the file belongs to. */
  entry: string;
  /** The file's path in models.json. */
  file: string;
  bytes: number;
  /** When it was stored, in ms since the epoch. */
  storedAt: number;
  sha256: string | null;
}
/** Every complete file the engine has stored in this origin. */
export function stored(): Promise<StoredFile[]>;
/** Deletes every stored file of one entry; resolves with how many files went. */
export function deleteStored(entry: string): Promise<number>;
/** Deletes everything the engine stored (its own folder only; nothing else of the origin's). */
export function clearStored(): Promise<void>;
