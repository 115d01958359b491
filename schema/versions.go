package schema

// StoreFormatKey holds, in the library's evolution partition
// (evolve.Partition), the store's format of one namespace (a
// StoreFormatV1): the newest format the namespace's rows may be written
// in, which every process of the store reads. A namespace without one is
// at format 1. Package evolve raises it, one format at a time, never
// down.
//
//mk:key tag=60 value=StoreFormatV1
type StoreFormatKey struct {
	Namespace string `mk:"max=32"`
}

// FormatRaisedKey records, in the evolution partition, how a namespace
// reached one format (a StoreFormatV1): a raise, with who raised it, when
// and why, or a new store starting at the formats its first binary knew.
// One row a format, never rewritten.
//
//mk:key tag=61 value=StoreFormatV1
type FormatRaisedKey struct {
	Namespace string `mk:"max=32"`
	Format    uint32
}

// ProcessKey holds, in the evolution partition, one live process's row (a
// ProcessV1): the formats its binary knows, until its lease expires. A
// raise refuses a format some live process does not know.
//
//mk:key tag=62 value=ProcessV1
type ProcessKey struct {
	Process string `mk:"max=128"`
}

// StoreFormatV1 is a namespace's store format (StoreFormatKey) or one step
// of its history (FormatRaisedKey): the format, when it was set (Unix
// milliseconds), by whom and why, and the live processes a forced raise
// went past although they did not know the format.
//
//mk:record version=1
type StoreFormatV1 struct {
	Format uint32 `mk:"min=1"`
	AtMs   uint64
	By     string   `mk:"max=128"`
	Reason string   `mk:"max=1024"`
	Forced []string `mk:"max=64,elem_max=128"`
}

// ProcessV1 is a process's row (ProcessKey): what its binary is, when it
// opened the store and until when the row is live (Unix milliseconds,
// renewed while the process runs), and the newest format it knows of each
// namespace it links.
//
//mk:record version=1
type ProcessV1 struct {
	Binary      string `mk:"max=256"`
	StartedAtMs uint64
	ExpiresAtMs uint64
	Known       []NamespaceFormat `mk:"max=64"`
}

// NamespaceFormat is a format of one namespace.
type NamespaceFormat struct {
	Namespace string `mk:"max=32"`
	Format    uint32 `mk:"min=1"`
}
