// rate-limiter-flexible, the peer of bench/compare, driven the way caudal's own load programs drive
// caudal, so that each figure compares like with like. One line of key=value figures on stdout.
//
//   node rlf.js memory SECONDS                 RateLimiterMemory, 1,000,000 keys "user:0000042"
//                                              (each filled first), 100 per hour, a uniform key
//                                              per decision, as bench/memory_store_bench does
//   node rlf.js redis SECONDS PORT IN_FLIGHT   RateLimiterRedis over ioredis, 100,000 keys, 10^9
//                                              per second (every decision allowed, as
//                                              bench/redis_load), IN_FLIGHT calls kept in flight;
//                                              with RLF_LATENCIES=FILE, every latency (ms) to FILE
//   node rlf.js trace PORT|memory POINTS WINDOW_MS OFFSETS_MS_CSV
//                                              replays one key's trace in real time; prints
//                                              "sent:answered" offsets (ms) of the admitted ones
//
// NODE_PATH must name the folder holding rate-limiter-flexible and ioredis (bench/compare
// installs them into a scratch folder).
'use strict';
const { RateLimiterMemory, RateLimiterRedis } = require('rate-limiter-flexible');

const [mode, ...args] = process.argv.slice(2);

// A 32-bit xorshift: a uniform enough index in a few operations.
function xorshift(seed) {
  let s = (seed * 2654435761) | 1;
  return (n) => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) % n;
  };
}

function key(i) { return 'user:' + String(i).padStart(7, '0'); }

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function memory(seconds) {
  const n = 1000000;
  const keys = Array.from({ length: n }, (_, i) => key(i));
  const limiter = new RateLimiterMemory({ points: 100, duration: 3600 });
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let j = i; j < i + 1000; ++j) batch.push(limiter.consume(keys[j], 1).catch(() => {}));
    await Promise.all(batch);
  }
  const next = xorshift(process.pid);
  let decisions = 0;
  let allowed = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  let now = start;
  while (now < end) {
    const batch = [];
    for (let j = 0; j < 1000; ++j) {
      batch.push(limiter.consume(keys[next(n)], 1).then(() => 1, () => 0));
    }
    for (const a of await Promise.all(batch)) allowed += a;
    decisions += 1000;
    now = process.hrtime.bigint();
  }
  const secs = Number(now - start) / 1e9;
  console.log(`decisions_per_s=${(decisions / secs).toFixed(0)} allowed_fraction=${(allowed / decisions).toFixed(3)} keys=${n}`);
}

async function redis(seconds, port, inFlight) {
  const Redis = require('ioredis');
  const client = new Redis({ port, host: '127.0.0.1', enableOfflineQueue: true });
  const limiter = new RateLimiterRedis({
    storeClient: client, points: 1000000000, duration: 1, keyPrefix: 'rlf',
  });
  const n = 100000;
  const next = xorshift(process.pid);
  const warmupEnd = Date.now() + 500;
  while (Date.now() < warmupEnd) await limiter.consume(key(next(n)), 1).catch(() => {});
  const lat = [];
  let errors = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  async function worker() {
    for (;;) {
      const t0 = process.hrtime.bigint();
      if (t0 >= end) return;
      try {
        await limiter.consume(key(next(n)), 1);
      } catch (e) {
        if (e instanceof Error) ++errors;
      }
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  lat.sort((a, b) => a - b);
  if (process.env.RLF_LATENCIES) {
    require('fs').writeFileSync(process.env.RLF_LATENCIES, lat.map((v) => v.toFixed(4)).join('\n') + '\n');
  }
  console.log(`in_flight=${inFlight} decisions_per_s=${(lat.length / secs).toFixed(0)} ` +
              `p50_ms=${percentile(lat, 0.5).toFixed(3)} p99_ms=${percentile(lat, 0.99).toFixed(3)} ` +
              `errors=${errors}`);
  client.disconnect();
}

async function trace(where, points, windowMs, offsetsCsv) {
  const offsets = offsetsCsv.split(',').map(Number);
  let limiter;
  let client;
  if (where === 'memory') {
    limiter = new RateLimiterMemory({ points, duration: windowMs / 1000 });
  } else {
    const Redis = require('ioredis');
    client = new Redis({ port: Number(where), host: '127.0.0.1' });
    limiter = new RateLimiterRedis({
      storeClient: client, points, duration: windowMs / 1000, keyPrefix: 'rlftrace' + process.pid,
    });
  }
  const admitted = [];
  const t0 = performance.now() + 100;
  for (const at of offsets) {
    const wait = t0 + at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sent = performance.now() - t0;
    try {
      await limiter.consume('client', 1);
      admitted.push(`${sent.toFixed(3)}:${(performance.now() - t0).toFixed(3)}`);
    } catch (e) {
      if (e instanceof Error) throw e;
    }
  }
  console.log(admitted.join(','));
  if (client) client.disconnect();
}

(async () => {
  if (mode === 'memory') await memory(Number(args[0]));
  else if (mode === 'redis') await redis(Number(args[0]), Number(args[1]), Number(args[2]));
  else if (mode === 'trace') await trace(args[0], Number(args[1]), Number(args[2]), args[3]);
  else {
    console.error('usage: rlf.js memory SECONDS | redis SECONDS PORT IN_FLIGHT | trace ...');
    process.exit(2);
  }
})().catch((e) => { console.error(e); process.exit(1); });
