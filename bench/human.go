package bench

// HumanColumns are the columns of each harness's human table (see
// Report.Human): name, then the figures that answer the bench's question,
// its ratio to the same-run baseline where there is one. Every field stays in
// --json. Keyed by the bench's command name.
var HumanColumns = map[string]map[string][]string{
	"store": {
		"":             {"block_bytes", "goroutines", "gbps", "baseline_gbps", "ratio"},
		"prefix_match": {"entries", "p50_us", "p99_us", "bytes_per_entry", "index_bytes_per_entry", "ratio"},
	},
	"http":     {"": {"value_bytes", "concurrency", "ops_per_s", "gbps", "p99_ms", "baseline_gbps", "ratio", "errors"}},
	"resp":     {"": {"value_bytes", "pipeline", "clients", "ops_per_sec", "baseline_ops_per_sec", "ratio", "cpu_us_per_op"}},
	"transfer": {"": {"gbps", "baseline_gbps", "ratio", "p50_us", "p99_us", "threads", "block_size"}},
	"router":   {"": {"path", "requests", "p50_ms", "p99_ms", "added_p50_ms", "baseline_p50_ms", "ratio"}},
	"hitrate":  {"": {"capacity_tokens", "hit_rate", "compute_saved", "baseline_hit_rate", "ratio", "gap_closed"}},
	"pool":     {"": {"nodes", "capacity_tokens", "hit_rate", "compute_saved", "baseline_hit_rate", "ratio"}},
	"cluster": {
		"":          {"block_bytes", "gbps", "baseline_gbps", "puts_per_s", "ratio", "p50_us", "p99_us"},
		"replay_":   {"nodes", "requests", "hit_rate", "baseline_hit_rate", "ratio", "local_hits", "remote_hits"},
		"replicas_": {"t_s", "max_replicas"},
	},
	"replication": {"": {"t_s", "hot_blocks", "copies", "drops", "hit_rate", "local_share", "ratio"}},
	"sched":       {"": {"avg_ttft_s", "p90_ttft_s", "p90_tbt_ms", "effective_capacity", "hit_rate", "ratio"}},
	"e2e": {
		"e2e":          {"mode", "requests", "failed", "ttft_mean_s", "ttft_p90_s", "saved_frac", "ratio", "load_stall_s"},
		"adapter_load": {"layout", "transport", "gbps", "baseline_gbps", "ratio", "http_gbps"},
		"disagg":       {"layout", "prompts", "prefill_s", "transfer_s", "exposed_s", "hidden_frac"},
	},
	"e2e --router": {
		"e2e":          {"routing", "requests", "failed", "ttft_mean_s", "ttft_p90_s", "effective_capacity", "hit_frac", "busiest_engine_frac"},
		"adapter_load": {"layout", "transport", "gbps", "baseline_gbps", "ratio", "http_gbps"},
	},
	"soak": {"": {"node", "t_s", "requests", "errors", "p99_get_ms", "p99_put_ms", "max_rss_bytes"}},
}
