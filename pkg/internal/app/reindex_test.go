package app

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// reindex backfills files written while no indexer ran, with progress and a summary, and a
// second run changes nothing.
func TestReindexBackfillsIdempotently(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	a, err := openStore(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace.New(a.DB, workspace.WithDefaults("en", "UTC"))
	for _, agent := range []int64{1, 2} {
		if _, _, err := ws.Write(ctx, agent, "memory/2026-03-01.md", "# 2026-03-01\n\nBackfilled fact.\n", workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()

	var out, errOut bytes.Buffer
	if code := reindex(ctx, cfg, log, nil, &out, &errOut); code != 0 {
		t.Fatalf("reindex exit %d: %s", code, errOut.String())
	}
	// Two agents × (4 seeded files + the note).
	if !strings.Contains(out.String(), "10/10 files (100%)") || !strings.Contains(out.String(), "10 files: 10 indexed") {
		t.Fatalf("first run output:\n%s", out.String())
	}
	out.Reset()
	if code := reindex(ctx, cfg, log, []string{"-agent", "1"}, &out, &errOut); code != 0 {
		t.Fatalf("second reindex exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "5 files: 0 indexed, 0 removed, 0 embeddings completed, 5 unchanged") {
		t.Fatalf("second run must change nothing:\n%s", out.String())
	}
}

// eval runs the built-in set against an OpenAI-compatible embeddings endpoint.
func TestEvalSubcommandAgainstAnEndpoint(t *testing.T) {
	srv := embedtest.New(t, 256)
	cfg := config.Default()
	cfg.Mate.Embedding.BaseURL, cfg.Mate.Embedding.Model = srv.URL, "hash-test"
	var out, errOut bytes.Buffer
	if code := evalRecall(context.Background(), cfg, slog.New(slog.DiscardHandler), nil, &out, &errOut); code != 0 {
		t.Fatalf("eval exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"indexed 172 files", "| hybrid (defaults) | 300 |", "| lexical (BM25 only) | 300 |", "superseded: newer first", "no-answer: no hits",
		"| hybrid (defaults) | ", "cosine ≥ 0.80", "coverage ≥ 0.60"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("eval output lacks %q:\n%s", want, out.String())
		}
	}
	if srv.Texts.Load() < 172 {
		t.Errorf("the endpoint embedded %d texts; the set has 172 files", srv.Texts.Load())
	}
}

// The service searches with the settings the evaluation measures: the configuration's
// defaults are recall's (a min-score of 0.1 in the configuration alone once cut answers
// that the evaluation, run with recall's defaults, found).
func TestSearchDefaultsAreRecallsDefaults(t *testing.T) {
	got := recall.NewSearcher(nil, nil, recallSettings(config.Default())).Settings()
	if want := recall.Defaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the configuration's search defaults are not recall's:\n got %+v\nwant %+v", got, want)
	}
}
