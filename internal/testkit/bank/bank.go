// Package bank is a small bank, the library's tests' own importing
// service (schema ./schema, namespace "bank", generated into ./bankgen):
// accounts' withdrawals and transfers, in branch partitions, each an
// outcome source of its own (package outcome). Withdrawals stay once
// their outcome is acknowledged; transfers are deleted.
package bank

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/outcome"
)

// Withdrawal is the payload of a withdrawal's outcome.
type Withdrawal struct {
	Account     string `json:"account"`
	Seq         uint64 `json:"seq"`
	AmountCents uint64 `json:"amount_cents"`
	Settled     bool   `json:"settled"`
}

// Transfer is the payload of a transfer's outcome.
type Transfer struct {
	From        string `json:"from"`
	To          string `json:"to"`
	AmountCents uint64 `json:"amount_cents"`
}

// Done reports whether a withdrawal or transfer in state s is terminal.
func Done(s bankgen.State) bool { return s == bankgen.StateSettled || s == bankgen.StateFailed }

// WithdrawalID is a withdrawal's outcome id: wd_<account>_<seq>.
func WithdrawalID(k bankgen.WithdrawalKey, _ bankgen.WithdrawalV1) string {
	return fmt.Sprintf("wd_%s_%d", k.Account, k.Seq)
}

// TransferID is a transfer's outcome id: tr_<from>_<seq>.
func TransferID(k bankgen.TransferKey, _ bankgen.TransferV1) string {
	return fmt.Sprintf("tr_%s_%d", k.From, k.Seq)
}

// WithdrawalEvent is a withdrawal's outcome: withdrawal.settled at its
// settlement time, or withdrawal.failed at the time it was queued.
func WithdrawalEvent(k bankgen.WithdrawalKey, w bankgen.WithdrawalV1) (outcome.Event, error) {
	ev := outcome.Event{Type: "withdrawal.failed",
		Data: Withdrawal{Account: k.Account.String(), Seq: k.Seq, AmountCents: w.AmountCents, Settled: w.State == bankgen.StateSettled}}
	if w.State == bankgen.StateSettled {
		ev.Type, ev.Time = "withdrawal.settled", time.UnixMilli(int64(w.SettledAtMs))
	}
	return ev, nil
}

// WithdrawalConfig is the withdrawals' source configuration, named name,
// whose acknowledgment does onAck.
func WithdrawalConfig(name string, onAck outcome.AckAction) outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1] {
	return outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]{
		Name:      name,
		Namespace: bankgen.SchemaNamespace,
		ParseKey:  bankgen.ParseWithdrawalKey,
		Decode:    bankgen.DecodeWithdrawalV1,
		Encode:    outcome.OneVersion(bankgen.EncodeWithdrawalV1),
		Terminal:  func(w bankgen.WithdrawalV1) bool { return Done(w.State) },
		ID:        WithdrawalID,
		Event:     WithdrawalEvent,
		OnAck:     onAck,
	}
}

// Withdrawals is the withdrawals' source, "bank.withdrawals": kept once
// acknowledged.
func Withdrawals() *outcome.TypedSource[bankgen.WithdrawalKey, bankgen.WithdrawalV1] {
	return must(outcome.NewSource(WithdrawalConfig("bank.withdrawals", outcome.KeepRecord)))
}

// Transfers is the transfers' source, "bank.transfers": each outcome
// takes the time it was queued, and its acknowledgment deletes the
// transfer.
func Transfers() *outcome.TypedSource[bankgen.TransferKey, bankgen.TransferV1] {
	return must(outcome.NewSource(outcome.SourceConfig[bankgen.TransferKey, bankgen.TransferV1]{
		Name:      "bank.transfers",
		Namespace: bankgen.SchemaNamespace,
		ParseKey:  bankgen.ParseTransferKey,
		Decode:    bankgen.DecodeTransferV1,
		Encode:    outcome.OneVersion(bankgen.EncodeTransferV1),
		Terminal:  func(r bankgen.TransferV1) bool { return Done(r.State) },
		ID:        TransferID,
		Event: func(k bankgen.TransferKey, r bankgen.TransferV1) (outcome.Event, error) {
			data, err := json.Marshal(Transfer{From: k.From.String(), To: r.To.String(), AmountCents: r.AmountCents})
			return outcome.Event{Type: "transfer.settled", Data: json.RawMessage(data)}, err
		},
		OnAck: outcome.DeleteRecord,
	}))
}

// WithdrawalKey and TransferKey build keys.
func WithdrawalKey(account string, seq uint64) bankgen.WithdrawalKey {
	return bankgen.WithdrawalKey{Account: bankgen.MustAccountID(account), Seq: seq}
}

// TransferKey is the key of transfer seq from account.
func TransferKey(account string, seq uint64) bankgen.TransferKey {
	return bankgen.TransferKey{From: bankgen.MustAccountID(account), Seq: seq}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
