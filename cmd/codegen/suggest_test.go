package main

import "testing"

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"max", "max", 0},
		{"", "max", 3},
		{"maxx", "max", 1},
		{"mx", "max", 1},
		{"tga", "tag", 1}, // one swap
		{"elemmax", "elem_max", 1},
		{"min", "max", 2},
		{"colour", "le", 5},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	opts := []string{"max", "elem_max", "min", "le", "sorted", "optional"}
	for _, c := range []struct{ name, want string }{
		{"maxx", "max"},
		{"MAX", "max"},
		{"mn", "min"},
		{"mix", "max"}, // a tie: the first listed wins
		{"elemMax", "elem_max"},
		{"sortd", "sorted"},
		{"optinal", "optional"},
		{"x", ""}, // two edits from max, for a name of one byte
		{"lt", "le"},
		{"ab", ""},
		{"colour", ""},
		{"maximum", ""},
	} {
		if got := closest(c.name, opts); got != c.want {
			t.Errorf("closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
