// Package schema is the schema of a small bank, the library's tests' own
// importing service: accounts' withdrawals and transfers, each an outcome
// source of its own (package outcome), in the account's branch
// partition. Generated into ../bankgen.
//
//mk:namespace bank
package schema

//go:generate go run ../../../../cmd/codegen -schema . -out ../bankgen -pkg bankgen

// AccountID names an account.
//
//mk:identity min=1 max=32
type AccountID string

// State is where a withdrawal or transfer is.
//
//mk:enum
type State uint8

const (
	StatePending State = 1
	StateSettled State = 2
	StateFailed  State = 3
)

// Partition is a bank partition.
//
//mk:union partition
type Partition struct {
	Branch *BranchPartition `mk:"tag=1,kind=branch"`
}

// BranchPartition holds one branch's accounts.
type BranchPartition struct {
	Branch uint16
}

// WithdrawalKey holds one withdrawal of an account (a WithdrawalV1).
//
//mk:key tag=100 value=WithdrawalV1
type WithdrawalKey struct {
	Account AccountID
	Seq     uint64
}

// TransferKey holds one transfer from an account (a TransferV1).
//
//mk:key tag=101 value=TransferV1
type TransferKey struct {
	From AccountID
	Seq  uint64
}

// WithdrawalV1 is a withdrawal: pending, then settled or failed.
//
//mk:record version=1
type WithdrawalV1 struct {
	State       State
	AmountCents uint64
	SettledAtMs uint64
}

// TransferV1 is a transfer: pending, then settled or failed.
//
//mk:record version=1
type TransferV1 struct {
	State       State
	To          AccountID
	AmountCents uint64
}
