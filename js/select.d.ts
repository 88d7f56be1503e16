/** Whether the threaded build (`readout/threads`) can run on this page, and why. */
export function threadedBuild(): { usable: boolean; why: string };
