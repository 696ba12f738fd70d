// run.js drives rolling-rate-limiter (its Redis limiter, over ioredis) with
// the workload of sluice's benchmark and prints one line of JSON: what the
// run measured. bench/rolling.go starts it; by hand:
//
//   node run.js --addr 127.0.0.1:6379 --keys 10000 --concurrency 64 \
//     --limit 100 --window-ms 60000 --min-difference-ms 0 --duration-ms 4000 --namespace rrl:
//
// Each of the concurrent loops walks the keys k0..k(keys-1) from its own
// offset, as the Go contenders' goroutines do; ioredis pipelines the loops'
// calls on its one connection.
'use strict';

const { RedisRateLimiter } = require('rolling-rate-limiter');
const Redis = require('ioredis');

function flags(argv) {
  const f = { addr: '127.0.0.1:6379', keys: 10000, concurrency: 64, limit: 100, windowMs: 60000, minDifferenceMs: 0, durationMs: 4000, namespace: 'rrl:' };
  for (let i = 0; i + 1 < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '').replace(/-(\w)/g, (_, c) => c.toUpperCase());
    if (!(name in f)) throw new Error(`unknown flag ${argv[i]}`);
    f[name] = typeof f[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  return f;
}

function percentile(sorted, q) {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
  const f = flags(process.argv.slice(2));
  const [host, port] = [f.addr.slice(0, f.addr.lastIndexOf(':')), Number(f.addr.slice(f.addr.lastIndexOf(':') + 1))];
  const client = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 0 });
  await client.connect();
  const limiter = new RedisRateLimiter({ client, namespace: f.namespace, interval: f.windowMs, maxInInterval: f.limit, minDifference: f.minDifferenceMs });
  const names = Array.from({ length: f.keys }, (_, i) => 'k' + i);
  let ops = 0, allowed = 0, errors = 0, firstError = '';
  const latencies = []; // µs
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(f.durationMs) * 1000000n;
  const loop = async (g) => {
    for (let i = (g * 7919) % f.keys; ; i = (i + 1) % f.keys) {
      const t0 = process.hrtime.bigint();
      if (t0 >= deadline) return;
      try {
        if (!(await limiter.limit(names[i]))) allowed++;
      } catch (e) {
        if (errors++ === 0) firstError = String(e);
      }
      ops++;
      latencies.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
  };
  await Promise.all(Array.from({ length: f.concurrency }, (_, g) => loop(g)));
  const elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  client.disconnect();
  process.stdout.write(JSON.stringify({
    ops, allowed, errors, firstError, elapsedMs,
    p50Us: percentile(latencies, 0.5), p99Us: percentile(latencies, 0.99),
    cpuUs: cpu.user + cpu.system,
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run.js: ${e.stack || e}\n`);
  process.exit(1);
});
