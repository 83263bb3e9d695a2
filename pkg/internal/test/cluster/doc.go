// Package cluster holds the multi-process tests and benchmarks of MateMemory: the four
// binaries, built once per test run, run as separate processes against a real three-node
// JetStream cluster (streams and buckets at R3), MariaDB when MATE_TEST_MYSQL_DSN is set or a
// shared SQLite file otherwise, and a fake OpenAI-compatible LLM (pkg/internal/llm/llmtest).
//
//	go test ./pkg/internal/test/cluster -v                                  # the cluster tests
//	go test ./pkg/internal/test/cluster -run '^$' -bench . -benchtime=1x    # the throughput benchmarks
//
// TestRollingUpgradeOldBesideNew (upgrade_test.go) also builds the release before this tree from
// the repository's history and runs both side by side (MariaDB only).
//
// Figures: docs/benchmarks.md.
package cluster
