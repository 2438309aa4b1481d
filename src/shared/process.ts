/** Whether this process runs as root (servers then need `--user=root` or an unprivileged owner). */
export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}
