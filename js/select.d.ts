/** Whether the threaded build (`readout/threads`) can run on this page, and why. */
export function threadedBuild(): { usable: boolean; why: string };

/** Whether the relaxed build (`readout/relaxed`: one thread, relaxed SIMD) can run on this page, and why. */
export function relaxedBuild(): { usable: boolean; why: string };

/** The fastest build this page can run ("threads", "relaxed" or "single"), and why. */
export function bestBuild(): { build: "threads" | "relaxed" | "single"; why: string };
