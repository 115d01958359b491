package kv

// Limits are the bounds an engine accepts. Each is inclusive.
type Limits struct {
	// MaxKeyBytes bounds one full key (root prefix, partition identity and
	// user key together).
	MaxKeyBytes int
	// MaxValueBytes bounds one value.
	MaxValueBytes int
	// MaxTxnBytes bounds the bytes one transaction affects, counted as
	// FoundationDB counts them: mutations plus read and write conflict
	// ranges.
	MaxTxnBytes int
}

// FoundationDB's documented limits: keys up to 10,000 bytes, values up to
// 100,000 bytes, transactions up to 10,000,000 bytes. Every engine of this
// module reports them ([FDBLimits]), so that data and batches that work
// on the memory and bbolt engines also fit FoundationDB.
const (
	FDBMaxKeyBytes   = 10_000
	FDBMaxValueBytes = 100_000
	FDBMaxTxnBytes   = 10_000_000
)

// FDBLimits returns FoundationDB's limits: FDBMaxKeyBytes, FDBMaxValueBytes
// and FDBMaxTxnBytes.
func FDBLimits() Limits {
	return Limits{MaxKeyBytes: FDBMaxKeyBytes, MaxValueBytes: FDBMaxValueBytes, MaxTxnBytes: FDBMaxTxnBytes}
}
