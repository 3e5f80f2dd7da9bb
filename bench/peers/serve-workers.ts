/**
 * Runs a ceiling server in `workers` processes sharing one port (node:cluster; the primary hands connections out
 * round-robin), for `npm run bench:standalone`'s multi-process ceiling rows: what Node.js reaches on this machine when
 * the server may use every core. The primary prints `ready <pid>...` (the workers' PIDs, whose CPU the bench counts)
 * once every worker listens.
 */
import cluster from 'node:cluster';

export function serveWorkers(workers: number, listen: (done: () => void) => void): void {
  if (workers <= 1) {
    listen(() => console.log(`ready ${process.pid}`));
    return;
  }
  if (cluster.isPrimary) {
    const pids: number[] = [];
    for (let i = 0; i < workers; i++) {
      const w = cluster.fork();
      w.on('message', () => {
        pids.push(w.process.pid ?? 0);
        if (pids.length === workers) console.log(`ready ${pids.join(' ')}`);
      });
    }
    process.on('SIGTERM', () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
      process.exit(0);
    });
    return;
  }
  listen(() => process.send?.('listening'));
}
