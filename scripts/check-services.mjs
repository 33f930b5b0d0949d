#!/usr/bin/env node
// Before the tests: Postgres and Redis must answer. If either does not, stop at once and
// say how to start it — never skip the tests that need it.
import net from 'node:net';

const pgUrl = new URL(process.env.WHEELHOUSE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
const redisUrl = new URL(process.env.WHEELHOUSE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');

function reachable(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port: Number(port), timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

const missing = [];
if (!(await reachable(pgUrl.hostname, pgUrl.port || 5432))) {
  missing.push(
    `PostgreSQL is not reachable at ${pgUrl.hostname}:${pgUrl.port || 5432}.\n` +
      `  Start it:  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n` +
      `  (or point WHEELHOUSE_TEST_POSTGRES_URL at a server; trust auth, database "test")`,
  );
}
if (!(await reachable(redisUrl.hostname, redisUrl.port || 6379))) {
  missing.push(
    `Redis is not reachable at ${redisUrl.hostname}:${redisUrl.port || 6379}.\n` +
      `  Start it:  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no\n` +
      `  (or point WHEELHOUSE_TEST_REDIS_URL at a server)`,
  );
}
if (missing.length > 0) {
  process.stderr.write(`The tests run against a real Postgres and Redis.\n\n${missing.join('\n\n')}\n`);
  process.exit(1);
}
