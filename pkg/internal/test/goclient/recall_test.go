package goclient_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/tool"
)

func TestSearchMemory(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	if _, err := c.CallTool(ctx, 3, tool.WriteFile, `{"filename":"memory/2026-05-30.md","content":"# 2026-05-30\n\nThe NAS is nas-home-01.\n"}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := c.SearchMemory(ctx, 3, client.MemoryQuery{Query: "nas-home-01", FilenamePrefix: "memory/"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) > 0 && strings.Contains(res.Hits[0].Snippet, "nas-home-01") && res.Hits[0].StartLine == 1 && res.Mode == "lexical" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not found: %+v", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.SearchMemory(ctx, 3, client.MemoryQuery{}); !client.IsBadRequest(err) {
		t.Fatalf("empty query: %v, want 400", err)
	}
}
