package fdblayer

import (
	"fmt"
	"log/slog"

	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Defaults of a Layer's configuration (see [Config]).
const (
	// DefaultRootPrefix is the tuple encoding of the string "mkit": every
	// key the Layer writes starts with it, so the whole keyspace reads as
	// tuples ("mkit", <partition identity...>, <key...>) in fdbcli.
	DefaultRootPrefix = "\x02mkit\x00"

	// DefaultMaxPartitionBytes bounds the tuple encoding of a partition's
	// identity. The Layer subtracts it (and the root prefix) from the
	// engine's key limit to get Capabilities.MaxKeyBytes, so every valid
	// key fits under every valid partition.
	DefaultMaxPartitionBytes = 1024

	// DefaultRetryLimit bounds the retries of one operation after
	// retryable engine errors (conflicts, unknown commit results), on top
	// of the bound the context sets.
	DefaultRetryLimit = 20

	// DefaultMaxScanRows bounds the rows of one Scan page whatever limit
	// the caller asks for; a longer scan continues with Next.
	DefaultMaxScanRows = 10_000

	// DefaultMaxScanBytes bounds the bytes of one Scan page after its
	// first row (store.Capabilities.MaxScanBytes): 1 MiB, a tenth of what
	// one FoundationDB transaction may write, so that a handler that
	// writes what it read (a relay copying rows) stays far within it.
	DefaultMaxScanBytes = 1 << 20

	// DefaultMaxTransactReadBytes bounds the bytes the reads of one
	// TransactOnce run hold together
	// (store.Capabilities.MaxTransactReadBytes): four full pages, read well
	// within FoundationDB's five seconds.
	DefaultMaxTransactReadBytes = 4 << 20

	// DefaultMaxCommitBatches and DefaultMaxCommitOps bound a commit of
	// several partitions (store.Capabilities.MaxCommitBatches and
	// MaxCommitOps): a hundred partitions' batches, a thousand
	// operations, which leave such a commit MaxCommitBytes of about
	// 1.7 MB within FoundationDB's transaction size (see capabilities).
	DefaultMaxCommitBatches = 100
	DefaultMaxCommitOps     = 1000

	// DefaultMaxGroupBatches bounds the Apply and Commit calls one group
	// commit takes (see Config.MaxGroupBatches).
	DefaultMaxGroupBatches = 128

	// DefaultOpenTimeout bounds the reads and writes of Open (its gate's:
	// see Config.Gate).
	DefaultOpenTimeout = 30 * time.Second
)

// NoGroupCommit, as Config.MaxGroupBatches, commits every Apply and
// Commit call in a write transaction of its own, on every engine.
const NoGroupCommit = -1

// NoRetries, as Config.RetryLimit, makes every operation give up at the
// first retryable engine error.
const NoRetries = -1

// Config configures a Layer at Open. The zero value is the default of
// every field: each zero field means the default its comment names. A
// negative limit (RetryLimit aside, where it means NoRetries) or a root
// starting with 0xFF fails Open with store.ErrInvalid, naming the field.
type Config struct {
	// RootPrefix is the bytes every key starts with: nil means
	// DefaultRootPrefix, an empty non-nil slice no prefix at all. Two
	// Layers with distinct, non-prefix-related roots share one engine
	// without seeing each other's data. A root starting with 0xFF
	// (FoundationDB's system keys) is invalid. Open copies it.
	RootPrefix []byte

	// MaxBatchOps is Capabilities.MaxBatchOps; zero means
	// store.DefaultMaxBatchOps (100). FoundationDB itself bounds a
	// transaction by bytes and time, not by operations; raising the cap
	// lowers MaxBatchBytes, which keeps room for every operation's key
	// overhead.
	MaxBatchOps int

	// MaxPartitionBytes is the largest partition identity encoding; zero
	// means DefaultMaxPartitionBytes.
	MaxPartitionBytes int

	// RetryLimit is how often one operation retries after retryable
	// engine errors; zero means DefaultRetryLimit, NoRetries (any
	// negative value) never retries.
	RetryLimit int

	// MaxScanRows is the most rows one Scan page returns; zero means
	// DefaultMaxScanRows.
	MaxScanRows int

	// MaxScanBytes is the most bytes of keys and values (keys counted with
	// their partition's prefix) one Scan page holds after its first row,
	// store.Capabilities.MaxScanBytes; zero means DefaultMaxScanBytes.
	MaxScanBytes int

	// MaxTransactReadBytes is the most bytes the reads of one TransactOnce
	// run hold together, store.Capabilities.MaxTransactReadBytes; zero
	// means DefaultMaxTransactReadBytes.
	MaxTransactReadBytes int

	// MaxCommitBatches and MaxCommitOps bound a commit of several
	// partitions (store.Capabilities.MaxCommitBatches and MaxCommitOps;
	// the Layer derives MaxCommitBytes from them and the engine's
	// transaction size); zero means DefaultMaxCommitBatches and
	// DefaultMaxCommitOps.
	MaxCommitBatches int
	MaxCommitOps     int

	// MaxGroupBatches bounds the Apply and Commit calls that one group
	// commit takes, on an engine whose commits share a sync
	// (kv.GroupCommitter: bbolt's); zero means DefaultMaxGroupBatches,
	// NoGroupCommit (any negative value) commits each call on its own.
	MaxGroupBatches int

	// Clock is what batch deadlines are checked against; nil means
	// clock.Real{}.
	Clock clock.Clock

	// Logger logs retries, unknown commit results and exhausted retries;
	// nil means slog.Default(). Records name partitions and errors, never
	// keys' values.
	Logger *slog.Logger

	// Gate configures the Layer's gate (package evolve), which Open opens
	// and Close closes: the store's format of each namespace, checked
	// against what this binary knows, and this process's row. The zero
	// GateConfig is every default (the process named host:pid, the known
	// formats those of the linked packages, a refresh every 10 s); its
	// Clock and Logger default to this Config's. Set ReadOnly for a
	// process that never writes (an operator's view). NewStore is Open's
	// to set: a Config that sets it fails Open with store.ErrInvalid.
	Gate evolve.GateConfig

	// OpenTimeout bounds the reads and writes Open makes (its gate's);
	// zero means DefaultOpenTimeout, and a negative one is invalid.
	OpenTimeout time.Duration
}

// config is a Config with its defaults filled in, as the Layer uses it.
type config struct {
	root              []byte
	maxBatchOps       int
	maxPartitionBytes int
	retryLimit        int // 0: no retries
	maxScanRows       int
	maxScanBytes      int
	maxTxnReadBytes   int
	maxCommitBatches  int
	maxCommitOps      int
	maxGroupBatches   int  // 0: no group commit
	commitSet         bool // MaxCommitBatches or MaxCommitOps was set
	clock             clock.Clock
	logger            *slog.Logger
	gate              evolve.GateConfig
	openTimeout       time.Duration
}

// resolve checks c and fills in its defaults. It fails with
// store.ErrInvalid, naming the field, for a negative limit or a root
// starting with 0xFF.
func (c Config) resolve() (config, error) {
	switch {
	case c.Gate.NewStore:
		return config{}, fmt.Errorf("%w: fdblayer: Config.Gate.NewStore is set: Open sets it for an engine that holds nothing under the root", store.ErrInvalid)
	case c.OpenTimeout < 0:
		return config{}, fmt.Errorf("%w: fdblayer: Config.OpenTimeout %v is negative", store.ErrInvalid, c.OpenTimeout)
	}
	if len(c.RootPrefix) > 0 && c.RootPrefix[0] == 0xFF {
		return config{}, fmt.Errorf("%w: fdblayer: Config.RootPrefix starts with 0xff (system keys)", store.ErrInvalid)
	}
	for _, f := range []struct {
		name string
		n    int
	}{
		{"MaxBatchOps", c.MaxBatchOps},
		{"MaxPartitionBytes", c.MaxPartitionBytes},
		{"MaxScanRows", c.MaxScanRows},
		{"MaxScanBytes", c.MaxScanBytes},
		{"MaxTransactReadBytes", c.MaxTransactReadBytes},
		{"MaxCommitBatches", c.MaxCommitBatches},
		{"MaxCommitOps", c.MaxCommitOps},
	} {
		if f.n < 0 {
			return config{}, fmt.Errorf("%w: fdblayer: Config.%s %d is negative", store.ErrInvalid, f.name, f.n)
		}
	}
	or := func(n, def int) int {
		if n == 0 {
			return def
		}
		return n
	}
	cfg := config{
		root:              []byte(DefaultRootPrefix),
		maxBatchOps:       or(c.MaxBatchOps, store.DefaultMaxBatchOps),
		maxPartitionBytes: or(c.MaxPartitionBytes, DefaultMaxPartitionBytes),
		retryLimit:        max(or(c.RetryLimit, DefaultRetryLimit), 0),
		maxScanRows:       or(c.MaxScanRows, DefaultMaxScanRows),
		maxScanBytes:      or(c.MaxScanBytes, DefaultMaxScanBytes),
		maxTxnReadBytes:   or(c.MaxTransactReadBytes, DefaultMaxTransactReadBytes),
		maxCommitBatches:  or(c.MaxCommitBatches, DefaultMaxCommitBatches),
		maxCommitOps:      or(c.MaxCommitOps, DefaultMaxCommitOps),
		maxGroupBatches:   max(or(c.MaxGroupBatches, DefaultMaxGroupBatches), 0),
		commitSet:         c.MaxCommitBatches != 0 || c.MaxCommitOps != 0,
		clock:             c.Clock,
		logger:            c.Logger,
		gate:              c.Gate,
		openTimeout:       c.OpenTimeout,
	}
	if cfg.openTimeout == 0 {
		cfg.openTimeout = DefaultOpenTimeout
	}
	if c.RootPrefix != nil {
		cfg.root = append([]byte{}, c.RootPrefix...)
	}
	if cfg.clock == nil {
		cfg.clock = clock.Real{}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.gate.Clock == nil {
		cfg.gate.Clock = cfg.clock
	}
	if cfg.gate.Logger == nil {
		cfg.gate.Logger = cfg.logger
	}
	return cfg, nil
}

// capabilities derives the store's capabilities from the engine's limits.
//
// Every key the engine sees is root + identity + user key, so a user key
// gets the engine's key limit minus the root and the largest identity.
// FoundationDB counts a transaction's bytes as its mutations plus its read
// and write conflict ranges: a write costs its full key three times (the
// mutation, the range [key, key+0x00)) plus its value, a precondition its
// full key twice. Batch.Bytes counts each user key once, so MaxBatchBytes
// keeps three engine keys' worth of room per operation, and for the four
// operations a Wakeup adds (see due.go).
//
// A commit of several partitions is bounded by its operations rather
// than by a full key's room each: every operation's key carries at most
// the root and the largest identity (and a due index key 12 bytes more),
// counted three times, plus a wake time's 16 bytes, for MaxCommitOps
// operations and each batch's wakeOpsCost; what the engine's
// transaction size leaves, divided by three (a key's bytes counted
// three times), is MaxCommitBytes.
func (c *config) capabilities(lim kv.Limits) (store.Capabilities, error) {
	caps := store.Capabilities{
		MaxBatchOps:   c.maxBatchOps,
		MaxKeyBytes:   lim.MaxKeyBytes - len(c.root) - c.maxPartitionBytes,
		MaxValueBytes: lim.MaxValueBytes,
		MaxBatchBytes: lim.MaxTxnBytes - (c.maxBatchOps+wakeOpsCost)*3*(lim.MaxKeyBytes+1),

		MaxScanBytes:         c.maxScanBytes,
		MaxTransactReadBytes: c.maxTxnReadBytes,

		MaxCommitBatches: c.maxCommitBatches,
		MaxCommitOps:     c.maxCommitOps,
	}
	perOp := 3*(len(c.root)+c.maxPartitionBytes+12) + 2*wakeBytes
	caps.MaxCommitBytes = (lim.MaxTxnBytes - (c.maxCommitOps+wakeOpsCost*c.maxCommitBatches)*perOp) / 3
	if caps.MaxKeyBytes < 1 {
		return caps, fmt.Errorf("%w: fdblayer: engine key limit %d leaves no room for keys after a %d-byte root and %d-byte partitions",
			store.ErrInvalid, lim.MaxKeyBytes, len(c.root), c.maxPartitionBytes)
	}
	if caps.MaxValueBytes < 1 || caps.MaxBatchBytes < 1 {
		return caps, fmt.Errorf("%w: fdblayer: engine limits %+v leave no room for %d-operation batches",
			store.ErrInvalid, lim, c.maxBatchOps)
	}
	if caps.MaxCommitBytes < 1 {
		if c.commitSet {
			return caps, fmt.Errorf("%w: fdblayer: Config.MaxCommitOps %d and MaxCommitBatches %d leave a commit of several partitions no bytes within the engine's %d-byte transactions",
				store.ErrInvalid, c.maxCommitOps, c.maxCommitBatches, lim.MaxTxnBytes)
		}
		// An engine too small for the default commit: one partition a
		// commit.
		caps.MaxCommitBatches, caps.MaxCommitOps, caps.MaxCommitBytes = 0, 0, 0
	}
	return caps, nil
}
