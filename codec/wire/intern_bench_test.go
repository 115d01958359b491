package wire

import (
	"fmt"
	"testing"
)

// BenchmarkName reads names through Name, from a table that holds them
// (hit) or never does (miss: 4096 distinct names, sixteen times the
// slots), against String and CheckIdentity (no table), side by side.
func BenchmarkName(b *testing.B) {
	names := make([][]byte, 4096)
	for i := range names {
		names[i] = AppendString(nil, fmt.Sprintf("refs/heads/%05d", i))
	}
	var held Intern[struct{}]
	for range 2 {
		r := NewReader(names[0], "T")
		r.Name("f", &held, "Ref", 1, 256)
	}
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := NewReader(names[0], "T")
			if r.Name("f", &held, "Ref", 1, 256) == "" {
				b.Fatal(r.Err())
			}
		}
	})
	for _, mode := range []string{"miss", "no-table"} {
		b.Run(mode, func(b *testing.B) {
			var tab Intern[struct{}]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := NewReader(names[i&4095], "T")
				i++
				if mode == "miss" {
					if r.Name("f", &tab, "Ref", 1, 256) == "" {
						b.Fatal(r.Err())
					}
					continue
				}
				s := r.String("f", 256)
				if CheckIdentity("Ref", s, 1, 256) != nil {
					b.Fatal(s)
				}
			}
		})
	}
}
