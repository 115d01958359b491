package wire

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestInternFindsOnlyExactEncodings(t *testing.T) {
	var tab Intern[int]
	for _, c := range []struct {
		name string
		key  string
	}{{"empty", ""}, {"short", "ns"}, {"long", "refs/heads/some-long-branch-name"}} {
		t.Run(c.name, func(t *testing.T) {
			if e, _ := tab.Find([]byte(c.key)); e != nil {
				t.Fatalf("found %q in an empty slot", c.key)
			}
			_, h := tab.Find([]byte(c.key))
			tab.Add(h, c.key, len(c.key))
			e, _ := tab.Find([]byte(c.key))
			if e == nil || e.Key != c.key || e.Value != len(c.key) {
				t.Fatalf("Find(%q) = %+v after Add", c.key, e)
			}
			if e, _ := tab.Find([]byte(c.key + "x")); e != nil {
				t.Fatalf("Find(%q) found %+v", c.key+"x", e)
			}
		})
	}
}

func TestInternHoldsAtMostItsSlots(t *testing.T) {
	var tab Intern[int]
	for i := range 4 * internSlots {
		k := fmt.Sprint(i)
		_, h := tab.Find([]byte(k))
		tab.Add(h, k, i)
	}
	held := 0
	for i := range 4 * internSlots {
		if e, _ := tab.Find([]byte(fmt.Sprint(i))); e != nil {
			if e.Value != i {
				t.Fatalf("key %d holds %d", i, e.Value)
			}
			held++
		}
	}
	if held == 0 || held > internSlots {
		t.Fatalf("%d of %d keys held, want 1..%d", held, 4*internSlots, internSlots)
	}
}

// TestInternConcurrent: run with -race; every hit is the exact key's.
func TestInternConcurrent(t *testing.T) {
	var tab Intern[string]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint((i * (g + 1)) % 700)
				if e, h := tab.Find([]byte(k)); e == nil {
					tab.Add(h, k, k)
				} else if e.Value != k {
					t.Errorf("Find(%q) = %q", k, e.Value)
					return
				}
			}
		})
	}
	wg.Wait()
}

// nameBytes is a length-prefixed name.
func nameBytes(s string) []byte { return AppendString(nil, s) }

func TestNameValidatesAndInterns(t *testing.T) {
	var tab Intern[struct{}]
	read := func(b []byte) (string, error) {
		r := NewReader(b, "T")
		s := r.Name("f", &tab, "Ref", 1, 16)
		return s, r.Finish()
	}
	// a name is held from its second read in a row on
	for range 2 {
		if s, err := read(nameBytes("refs/heads/main")); s != "refs/heads/main" || err != nil {
			t.Fatalf("Name = %q, %v", s, err)
		}
	}
	if e, _ := tab.Find([]byte("refs/heads/main")); e == nil {
		t.Fatal("a name read twice in a row is not held")
	}
	b := nameBytes("refs/heads/main")
	if n := testing.AllocsPerRun(100, func() { _, _ = read(b) }); n != 0 {
		t.Errorf("reading a held name allocates %v times", n)
	}
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"empty", nameBytes("")},
		{"control character", nameBytes("a\x01b")},
		{"invalid UTF-8", nameBytes("a\xffb")},
		{"over its bound", nameBytes("refs/heads/main/x")},
		{"truncated", nameBytes("refs")[:3]},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 4 {
				if s, err := read(c.in); err == nil || !errors.Is(err, ErrCorrupt) || s != "" {
					t.Fatalf("Name(%x) = %q, %v; want an ErrCorrupt failure", c.in, s, err)
				}
			}
			if e, _ := tab.Find(c.in[min(1, len(c.in)):]); e != nil {
				t.Fatalf("an invalid name was interned: %q", e.Key)
			}
		})
	}
}

func TestSpansMeasureWithoutReading(t *testing.T) {
	long := AppendString(nil, string(make([]byte, 300))) // a two-byte length
	for _, c := range []struct {
		name string
		b    []byte
		at   int
		want int
	}{
		{"empty string", []byte{0}, 0, 1},
		{"short string", []byte{2, 'a', 'b', 9}, 0, 3},
		{"two-byte length", long, 0, len(long)},
		{"truncated body", []byte{3, 'a'}, 0, -1},
		{"truncated length", []byte{0x80}, 0, -1},
		{"three-byte length", []byte{0x80, 0x80, 0x01}, 0, -1},
		{"at the end", []byte{1, 'a'}, 2, -1},
		{"after a failure", []byte{0}, -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := SpanString(c.b, c.at); got != c.want {
				t.Errorf("SpanString(%x, %d) = %d, want %d", c.b, c.at, got, c.want)
			}
		})
	}
	if got := SpanFixed([]byte{1, 2, 3}, 1, 2); got != 3 {
		t.Errorf("SpanFixed within = %d, want 3", got)
	}
	if got := SpanFixed([]byte{1, 2, 3}, 2, 2); got != -1 {
		t.Errorf("SpanFixed past the end = %d, want -1", got)
	}
	if got := SpanFixed([]byte{1, 2, 3}, -1, 0); got != -1 {
		t.Errorf("SpanFixed after a failure = %d, want -1", got)
	}
}

// Admit admits an encoding at its second miss in a row at its slot, and
// never one that a stream of new encodings brings only once.
func TestInternAdmitsAnEncodingAtItsSecondMiss(t *testing.T) {
	var tab Intern[struct{}]
	for i := range 4 * internSlots {
		if _, err := InternName([]byte(fmt.Sprint("name-", i)), &tab, "Name", 1, 64); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 * internSlots {
		if e, _ := tab.Find([]byte(fmt.Sprint("name-", i))); e != nil {
			t.Fatalf("name-%d, read once, was admitted", i)
		}
	}
	_, h := tab.Find([]byte("repeated"))
	if tab.Admit(h) {
		t.Fatal("admitted at the first miss")
	}
	if !tab.Admit(h) {
		t.Fatal("not admitted at the second miss in a row")
	}
	var other uint64
	for i := 0; other == 0 || internSlot(other) == internSlot(h); i++ {
		_, other = tab.Find([]byte(fmt.Sprint("another-", i)))
	}
	if tab.Admit(other) || !tab.Admit(h) {
		t.Fatal("a miss at another slot changed this slot's admission")
	}
}
