package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunRelaysEveryRowExactlyOnce(t *testing.T) {
	c := config{db: filepath.Join(t.TempDir(), "demo.db"), sources: 3, targets: 4, rows: 150, workers: 2, noSync: true, timeout: time.Minute}
	res, err := run(context.Background(), c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if want := c.sources * c.rows * 4; res.delivered != want {
		t.Errorf("verified %d target rows, want %d", res.delivered, want)
	}
	if want := c.sources * c.targets; res.checks != want {
		t.Errorf("verified %d high-water marks, want %d", res.checks, want)
	}
	if res.fires == 0 || !strings.Contains(res.String(), "exactly once") {
		t.Errorf("report %q after %d fires", res, res.fires)
	}
}

func TestConfigRejectsBadFlags(t *testing.T) {
	good := config{db: "x.db", sources: 1, targets: 1, rows: 1, workers: 1, timeout: time.Second}
	if err := good.validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*config){
		"empty db":     func(c *config) { c.db = "" },
		"no sources":   func(c *config) { c.sources = 0 },
		"no targets":   func(c *config) { c.targets = 0 },
		"no rows":      func(c *config) { c.rows = 0 },
		"too many":     func(c *config) { c.rows = 2_000_000 },
		"no workers":   func(c *config) { c.workers = 0 },
		"zero timeout": func(c *config) { c.timeout = 0 },
	} {
		c := good
		mutate(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
