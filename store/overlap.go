package store

// Overlapping is implemented by stores whose calls, made side by side,
// overlap: each waits for servers that serve many transactions at once
// (FoundationDB, and an engine that stands for it), so independent calls
// made at once take about one call's time. A store whose write
// transactions run one at a time (an embedded engine with a single writer)
// does not implement it, or reports false: there, calls made side by side
// only contend for its writer and the CPU. Handlers that can make
// independent calls at once (the relay's target lanes, outcome delivery's
// reads) ask with OverlapsCalls and make them one after another on a
// store that does not overlap them. A wrapper of a store forwards it.
type Overlapping interface {
	// OverlapsCalls reports whether calls made side by side overlap. It
	// is constant for the store's life.
	OverlapsCalls() bool
}

// OverlapsCalls reports whether s is Overlapping and says its calls
// overlap; false for any other store, and for nil.
func OverlapsCalls(s Store) bool {
	o, ok := s.(Overlapping)
	return ok && o.OverlapsCalls()
}
