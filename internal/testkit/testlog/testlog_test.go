package testlog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
