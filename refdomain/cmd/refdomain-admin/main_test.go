package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestDecodesTheReferenceDomainsRowsByName: the reference domain's
// command, built with package admin and the reference domain's schema
// linked, shows a coordinator's lease row as its own key and record, by
// name.
func TestDecodesTheReferenceDomainsRowsByName(t *testing.T) {
	if _, ok := registry.Lookup(refdomain.SchemaNamespace); !ok {
		t.Fatal("the reference domain's schema is not linked into the command")
	}
	db := filepath.Join(t.TempDir(), "ref.db")
	e, err := boltengine.Open(db, boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	coord := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("default")}
	key, err := refdomain.AppendLeasedShardKey(nil, refdomain.MustRepoName("r1"), refdomain.MustShardRef("refs/heads/main"))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := refdomain.EncodeLeasedShard(refdomain.LeasedShard{Epoch: 2, AckedEpoch: 2, ExpiresAtMs: 500, SweepDueMs: 600, RelayWatermarkMs: 40})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Apply(context.Background(), coord, store.NewBatch().Put(key, lease)); err != nil || !out.Committed() {
		t.Fatalf("apply: %v, %v", out, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"scan", "-db", db, "-partition", `("refdomain", 3, "default")`}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("scan: exit %d: %s", code, errOut.String())
	}
	if !hasLine(out.String(), `(101, "r1", "refs/heads/main")`, "LeasedShardKey", "LeasedShard{", "RelayWatermarkMs: 40") {
		t.Errorf("scan does not show the lease by name:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"partitions", "-db", db}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!hasLine(out.String(), `("refdomain", 3, "default")`, " coordinator ") || strings.Contains(out.String(), "not linked") {
		t.Errorf("partitions: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// hasLine reports whether a line of text holds every one of words.
func hasLine(text string, words ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		n := 0
		for _, w := range words {
			if strings.Contains(line, w) {
				n++
			}
		}
		if n == len(words) {
			return true
		}
	}
	return false
}
