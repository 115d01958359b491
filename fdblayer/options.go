package fdblayer

import (
	"fmt"
	"log/slog"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Defaults of a Layer's options.
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
)

// Option configures a Layer at Open.
type Option func(*config)

type config struct {
	root              []byte
	maxBatchOps       int
	maxPartitionBytes int
	retryLimit        int
	maxScanRows       int
	maxScanBytes      int
	maxTxnReadBytes   int
	clock             clock.Clock
	logger            *slog.Logger
}

func defaultConfig() config {
	return config{
		root:              []byte(DefaultRootPrefix),
		maxBatchOps:       store.DefaultMaxBatchOps,
		maxPartitionBytes: DefaultMaxPartitionBytes,
		retryLimit:        DefaultRetryLimit,
		maxScanRows:       DefaultMaxScanRows,
		maxScanBytes:      DefaultMaxScanBytes,
		maxTxnReadBytes:   DefaultMaxTransactReadBytes,
		clock:             clock.Real{},
		logger:            slog.Default(),
	}
}

// WithRootPrefix sets the bytes every key starts with (default
// DefaultRootPrefix). Two Layers with distinct, non-prefix-related roots
// share one engine without seeing each other's data. An empty root is
// allowed; a root starting with 0xFF (FoundationDB's system keys) is not.
// The prefix is copied.
func WithRootPrefix(prefix []byte) Option {
	return func(c *config) { c.root = append([]byte{}, prefix...) }
}

// WithMaxBatchOps sets Capabilities.MaxBatchOps (default
// store.DefaultMaxBatchOps, 100).
// FoundationDB itself bounds a transaction by bytes and time, not by
// operations; raising the cap lowers MaxBatchBytes, which keeps room for
// every operation's key overhead.
func WithMaxBatchOps(n int) Option { return func(c *config) { c.maxBatchOps = n } }

// WithMaxPartitionBytes sets the largest partition identity encoding
// (default DefaultMaxPartitionBytes).
func WithMaxPartitionBytes(n int) Option { return func(c *config) { c.maxPartitionBytes = n } }

// WithRetryLimit sets how often one operation retries after retryable
// engine errors (default DefaultRetryLimit; 0 never retries).
func WithRetryLimit(n int) Option { return func(c *config) { c.retryLimit = n } }

// WithMaxScanRows sets the most rows one Scan page returns (default
// DefaultMaxScanRows).
func WithMaxScanRows(n int) Option { return func(c *config) { c.maxScanRows = n } }

// WithMaxScanBytes sets the most bytes of keys and values (keys counted
// with their partition's prefix) one Scan page holds after its first row
// (default DefaultMaxScanBytes): store.Capabilities.MaxScanBytes.
func WithMaxScanBytes(n int) Option { return func(c *config) { c.maxScanBytes = n } }

// WithMaxTransactReadBytes sets the most bytes the reads of one
// TransactOnce run hold together (default DefaultMaxTransactReadBytes):
// store.Capabilities.MaxTransactReadBytes.
func WithMaxTransactReadBytes(n int) Option { return func(c *config) { c.maxTxnReadBytes = n } }

// WithClock sets the clock batch deadlines are checked against (default
// clock.Real{}).
func WithClock(clk clock.Clock) Option { return func(c *config) { c.clock = clk } }

// WithLogger sets the logger for retries, unknown commit results and
// exhausted retries (default slog.Default()). Records name partitions and
// errors, never keys' values.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

func (c *config) check() error {
	switch {
	case len(c.root) > 0 && c.root[0] == 0xFF:
		return fmt.Errorf("%w: fdblayer: root prefix starts with 0xff (system keys)", store.ErrInvalid)
	case c.maxBatchOps < 1:
		return fmt.Errorf("%w: fdblayer: max batch ops %d < 1", store.ErrInvalid, c.maxBatchOps)
	case c.maxPartitionBytes < 1:
		return fmt.Errorf("%w: fdblayer: max partition bytes %d < 1", store.ErrInvalid, c.maxPartitionBytes)
	case c.retryLimit < 0:
		return fmt.Errorf("%w: fdblayer: retry limit %d < 0", store.ErrInvalid, c.retryLimit)
	case c.maxScanRows < 1:
		return fmt.Errorf("%w: fdblayer: max scan rows %d < 1", store.ErrInvalid, c.maxScanRows)
	case c.maxScanBytes < 1:
		return fmt.Errorf("%w: fdblayer: max scan bytes %d < 1", store.ErrInvalid, c.maxScanBytes)
	case c.maxTxnReadBytes < 1:
		return fmt.Errorf("%w: fdblayer: max transact read bytes %d < 1", store.ErrInvalid, c.maxTxnReadBytes)
	case c.clock == nil:
		return fmt.Errorf("%w: fdblayer: nil clock", store.ErrInvalid)
	case c.logger == nil:
		return fmt.Errorf("%w: fdblayer: nil logger", store.ErrInvalid)
	}
	return nil
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
func (c *config) capabilities(lim kv.Limits) (store.Capabilities, error) {
	caps := store.Capabilities{
		MaxBatchOps:   c.maxBatchOps,
		MaxKeyBytes:   lim.MaxKeyBytes - len(c.root) - c.maxPartitionBytes,
		MaxValueBytes: lim.MaxValueBytes,
		MaxBatchBytes: lim.MaxTxnBytes - (c.maxBatchOps+wakeOpsCost)*3*(lim.MaxKeyBytes+1),

		MaxScanBytes:         c.maxScanBytes,
		MaxTransactReadBytes: c.maxTxnReadBytes,
	}
	if caps.MaxKeyBytes < 1 {
		return caps, fmt.Errorf("%w: fdblayer: engine key limit %d leaves no room for keys after a %d-byte root and %d-byte partitions",
			store.ErrInvalid, lim.MaxKeyBytes, len(c.root), c.maxPartitionBytes)
	}
	if caps.MaxValueBytes < 1 || caps.MaxBatchBytes < 1 {
		return caps, fmt.Errorf("%w: fdblayer: engine limits %+v leave no room for %d-operation batches",
			store.ErrInvalid, lim, c.maxBatchOps)
	}
	return caps, nil
}
