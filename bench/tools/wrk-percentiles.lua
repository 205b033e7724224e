-- wrk script of weir-bench's overload scenario: after the run, prints one line with the
-- requests, the errors and the latency percentiles wrk's --latency table does not show.
--   OVERLOAD requests=N errors=N p50=US p90=US p99=US p999=US max=US duration=US
done = function(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "OVERLOAD requests=%d errors=%d p50=%d p90=%d p99=%d p999=%d max=%d duration=%d\n",
      summary.requests, e.connect + e.read + e.write + e.status + e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.max, summary.duration))
end
