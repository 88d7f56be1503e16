// `readout/worker`: the engine in a dedicated module Worker, the same API with every call a promise.
import type {
  CriterionInput,
  Decision,
  EngineInfo,
  Limits,
  LoadOptions,
  PrefillOptions,
  PrefixInput,
  PrefixOptions,
  PrefixStorage,
  ScoreOptions,
  StateInput,
} from "./readout.js";

export type {
  CriterionInput,
  Decision,
  EngineInfo,
  Limits,
  LoadOptions,
  PrefillOptions,
  PrefixInput,
  PrefixOptions,
  PrefixStorage,
  ReadoutError,
  ScoreOptions,
  StateInput,
  StorageInfo,
} from "./readout.js";

export interface WorkerLoadOptions extends LoadOptions {
  /** Which build runs in the worker: "auto" (default; `readout/select`'s `bestBuild()`: threads, else relaxed, else single), "single", "relaxed" or "threads". */
  build?: "auto" | "single" | "relaxed" | "threads";
}

export class Engine {
  private constructor();
  /** Starts a worker and loads the model in it. Relative URLs are resolved against the page. */
  static load(source: string, options?: WorkerLoadOptions): Promise<Engine>;
  /** The build running in the worker. */
  readonly build: "single" | "relaxed" | "threads";
  /** False once the worker has ended (disposed, terminated, or died). */
  readonly alive: boolean;
  prefill(state: StateInput, options?: PrefillOptions): Promise<State>;
  prefix(spec: PrefixInput, options?: PrefixOptions): Promise<Prefix>;
  /** A prefix from `prefix.save()`'s bytes; refused with code "stale_prefix" (naming the field) when they were made elsewhere or damaged. */
  restorePrefix(bytes: Uint8Array, spec?: PrefixInput, options?: PrefillOptions): Promise<Prefix>;
  info(): Promise<EngineInfo>;
  liveGpuTensors(): Promise<number>;
  bytesReadBack(): Promise<number>;
  /** Releases the engine and ends its worker; later calls are refused with code "engine_disposed". */
  dispose(): Promise<void>;
  /** Ends the worker now: pending and later calls are rejected with code "worker_died". */
  terminate(): void;
}

export class Prefix {
  private constructor();
  readonly tokens: number;
  /** Where a prefix made with `keep: true` came from; null otherwise. */
  readonly storage: PrefixStorage | null;
  prefill(state: StateInput): Promise<State>;
  /** Its past and key as bytes, for `restorePrefix` in a later visit. */
  save(): Promise<Uint8Array>;
  dispose(): Promise<void>;
}

export class State {
  private constructor();
  /** As of the last call on this state. */
  readonly tokens: number;
  extend(text: string): Promise<void>;
  score(criterion: CriterionInput, options?: ScoreOptions): Promise<Decision>;
  scoreAll(criteria: CriterionInput[], options?: ScoreOptions): Promise<Decision[]>;
  extract(criteria: CriterionInput[]): Promise<Float32Array[]>;
  dispose(): Promise<void>;
}

/** Nothing to start on the page; kept so `import init, { Engine }` reads as with `readout`. */
export default function init(): Promise<void>;
export function limits(): Promise<Limits>;
export function defaultThreads(hardwareConcurrency: number, crossOriginIsolated: boolean): Promise<number>;
export { clearStored, deleteStored, stored } from "./storage.js";
export type { StoredFile } from "./storage.js";
