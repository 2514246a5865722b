-- bench:authproxy's wrk script: at the end of a run, one JSON line with the counts and the latency
-- percentiles (microseconds) of wrk's own histogram (the figures `--latency` prints, at full
-- precision). wrk 4.1's done() gets the summary, the latency histogram and the per-thread request rates.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"wrk_report":1,"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p75_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f,"stdev_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(75), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean, latency.stdev))
end
