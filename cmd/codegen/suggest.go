package main

import (
	"fmt"
	"strings"
)

// unknownName says that name is not one of known, a closed set of words
// (directive arguments, field options): "unknown <what> "name": did you
// mean <closest>? (the <noun>s are a, b and c)", where noun is what's last
// word. guess is the known word
// taken to be meant, "" when none is close: the caller treats it as given,
// so that no second error says it is missing.
func unknownName(what, name string, known []string) (msg, guess string) {
	guess = closest(name, known)
	noun := what[strings.LastIndex(what, " ")+1:]
	var names string
	switch len(known) {
	case 0:
		names = "there are none"
	case 1:
		names = fmt.Sprintf("the %s is %s", noun, known[0])
	default:
		names = fmt.Sprintf("the %ss are %s and %s", noun, strings.Join(known[:len(known)-1], ", "), known[len(known)-1])
	}
	if guess != "" {
		return fmt.Sprintf("unknown %s %q: did you mean %s? (%s)", what, name, guess, names), guess
	}
	return fmt.Sprintf("unknown %s %q (%s)", what, name, names), ""
}

// closest returns the word of known nearest to name, ignoring case, when
// it is at most two edits away and at most one edit for every two bytes of
// name (so that "x" suggests nothing), or "" when none is; the first in
// known wins a tie.
func closest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		d := editDistance(strings.ToLower(name), k)
		if d < bestDist && 2*d <= len(name) {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and swaps of adjacent
// bytes that turn one into the other.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
