-- Shared by bench/*.lua: one machine-readable line for bench/compare after a wrk run.
-- Latencies are wrk's (microseconds); errors.status counts answers outside 2xx/3xx.
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'BENCHJSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, ' ..
      '"max_us": %d, "err_connect": %d, "err_read": %d, "err_write": %d, "err_status": %d, ' ..
      '"err_timeout": %d}\n',
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
