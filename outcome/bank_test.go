package outcome_test

// Outcomes of an importing service's own records: a small bank (schema
// internal/testkit/bank/schema, namespace "bank") whose withdrawals and
// transfers are two outcome sources of one Delivery, in the bank's own
// partitions.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// branch is the bank tests' partition.
var branch = bankgen.BranchPartition{Branch: 7}

type withdrawal = bank.Withdrawal
type transfer = bank.Transfer

var (
	settledOrFailed = bank.Done
	withdrawalID    = bank.WithdrawalID
	withdrawalEvent = bank.WithdrawalEvent
	wdKey           = bank.WithdrawalKey
	trKey           = bank.TransferKey
)

// newWithdrawalSource is the withdrawals' source named name, whose
// acknowledgment does onAck.
func newWithdrawalSource(t testing.TB, name string, onAck outcome.AckAction) *outcome.TypedSource[bankgen.WithdrawalKey, bankgen.WithdrawalV1] {
	src, err := outcome.NewSource(bank.WithdrawalConfig(name, onAck))
	require.NoError(t, err)
	return src
}

func newTransferSource(testing.TB) *outcome.TypedSource[bankgen.TransferKey, bankgen.TransferV1] {
	return bank.Transfers()
}

// bankSvc is the bank service's state in one test.
type bankSvc struct {
	t           testing.TB
	s           store.Store
	clock       *clock.Manual
	withdrawals *outcome.TypedSource[bankgen.WithdrawalKey, bankgen.WithdrawalV1]
	transfers   *outcome.TypedSource[bankgen.TransferKey, bankgen.TransferV1]
}

func mustKey(t testing.TB, k outcome.Key) store.Key {
	b, err := k.AppendKey(nil)
	require.NoError(t, err)
	return b
}

// open writes pending withdrawals and transfers of account, seq 1 to n.
func (bk *bankSvc) open(p store.Partition, account string, n int) {
	t := bk.t
	b := store.NewBatch()
	for i := 1; i <= n; i++ {
		w, err := bankgen.EncodeWithdrawalV1(bankgen.WithdrawalV1{State: bankgen.StatePending, AmountCents: uint64(100 * i)})
		require.NoError(t, err)
		tr, err := bankgen.EncodeTransferV1(bankgen.TransferV1{State: bankgen.StatePending, To: bankgen.MustAccountID("savings"), AmountCents: uint64(10 * i)})
		require.NoError(t, err)
		b.Put(mustKey(t, wdKey(account, uint64(i))), w).Put(mustKey(t, trKey(account, uint64(i))), tr)
	}
	out, err := bk.s.Apply(ctx, p, b)
	require.NoError(t, err)
	require.True(t, out.Committed())
}

// settle settles, in one batch of the service's own, withdrawal seq of
// account and, when withTransfer, its transfer seq too: the records
// become terminal and their outcomes are queued.
func (bk *bankSvc) settle(p store.Partition, account string, seq uint64, withTransfer bool) {
	t := bk.t
	now := bk.clock.Now()
	_, err := store.Transact(ctx, bk.s, p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		o, err := outbox.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		ob, err := outbox.NewBuilder(bk.s, now, o)
		if err != nil {
			return nil, err
		}
		wk := wdKey(account, seq)
		prior, _, err := r.Get(ctx, mustKey(t, wk))
		if err != nil {
			return nil, err
		}
		w, err := bankgen.DecodeWithdrawalV1(prior)
		if err != nil {
			return nil, err
		}
		settledMs, err := store.EncodeTime(now.Add(-time.Millisecond)) // the record's stored time
		if err != nil {
			return nil, err
		}
		w.State, w.SettledAtMs = bankgen.StateSettled, settledMs
		if _, err := bk.withdrawals.Append(context.Background(), ob, wk, prior, w); err != nil {
			return nil, err
		}
		if withTransfer {
			tk := trKey(account, seq)
			prior, _, err := r.Get(ctx, mustKey(t, tk))
			if err != nil {
				return nil, err
			}
			tr, err := bankgen.DecodeTransferV1(prior)
			if err != nil {
				return nil, err
			}
			tr.State = bankgen.StateSettled
			if _, err := bk.transfers.Append(context.Background(), ob, tk, prior, tr); err != nil {
				return nil, err
			}
		}
		b := store.NewBatch()
		return b, ob.Finish(b)
	}, store.TransactConfig{})
	require.NoError(t, err)
}

// bankReceiver is a Receiver over loopback HTTP that records what its
// handler is given.
type bankReceiver struct {
	mu  sync.Mutex
	got []outcome.Envelope
	url string
}

func newBankReceiver(t testing.TB, key *outcome.HMACKey) *bankReceiver {
	rs := &bankReceiver{}
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
	require.NoError(t, err)
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ context.Context, e outcome.Envelope) error {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.got = append(rs.got, e)
		return nil
	})))
	t.Cleanup(srv.Close)
	rs.url = srv.URL
	return rs
}

func (rs *bankReceiver) envelopes() []outcome.Envelope {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]outcome.Envelope(nil), rs.got...)
}

// An importing service's own records become terminal in its own batches;
// a Scheduler delivers their outcomes, of two sources of one Delivery,
// interleaved in sequence order, to a Receiver over HTTP; the
// acknowledgment keeps the withdrawals and deletes the transfers, as
// their sources say. On every engine.
func TestAServicesOwnOutcomesReachAReceiverThroughAScheduler(t *testing.T) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			e := newEnvOn(t, eng, bankT0)
			bk := &bankSvc{t: t, s: e.s, clock: e.clock,
				withdrawals: newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord), transfers: newTransferSource(t)}
			other := bankgen.BranchPartition{Branch: 8}
			bk.open(branch, "ada", 3)
			bk.open(other, "bob", 1)
			bk.settle(branch, "ada", 1, true)
			e.clock.Advance(time.Second)
			bk.settle(branch, "ada", 2, false)
			bk.settle(other, "bob", 1, true)
			e.clock.Advance(time.Second)
			bk.settle(branch, "ada", 3, true)
			queuedAt := e.clock.Now()

			key, err := outcome.NewHMACKey([]byte("0123456789abcdef0123456789abcdef"))
			require.NoError(t, err)
			rs := newBankReceiver(t, key)
			sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: rs.url, Signer: key})
			require.NoError(t, err)
			d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{bk.withdrawals, bk.transfers}})
			require.NoError(t, err)
			reg, err := timers.NewRegistry(d)
			require.NoError(t, err)
			sched, err := timers.NewScheduler(timers.SchedulerConfig{Store: e.s, Registry: reg, Owner: "w1", Workers: 1, Clock: e.clock, Logger: e.log,
				ParsePartition: timers.PartitionParser(bankgen.ParsePartition)})
			require.NoError(t, err)
			rep, err := sched.Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Timers.Fired, "one delivery timer per partition")
			parts := []store.Partition{branch, other}
			require.NoError(t, timerstest.CheckDueIndex(ctx, e.s, parts))

			byPartition := map[string][]string{}
			for _, env := range rs.envelopes() {
				byPartition[env.ID[3:6]] = append(byPartition[env.ID[3:6]], env.ID)
				switch env.Type {
				case "withdrawal.settled":
					var w withdrawal
					require.NoError(t, json.Unmarshal(env.Data, &w))
					assert.True(t, w.Settled)
					assert.Equal(t, fmt.Sprintf("wd_%s_%d", w.Account, w.Seq), env.ID)
					assert.Equal(t, 100*w.Seq, w.AmountCents)
				case "transfer.settled":
					var tr transfer
					require.NoError(t, json.Unmarshal(env.Data, &tr))
					assert.Equal(t, "savings", tr.To)
					if env.ID == "tr_ada_3" {
						assert.True(t, queuedAt.Equal(env.Timestamp), "a transfer's outcome takes the time it was queued: %v, queued at %v", env.Timestamp, queuedAt)
					}
				default:
					t.Errorf("unexpected type %q", env.Type)
				}
			}
			assert.Equal(t, []string{"wd_ada_1", "tr_ada_1", "wd_ada_2", "wd_ada_3", "tr_ada_3"}, byPartition["ada"], "both sources, in sequence order")
			assert.Equal(t, []string{"wd_bob_1", "tr_bob_1"}, byPartition["bob"])

			for _, p := range parts {
				e.p = p
				assert.Zero(t, e.backlogRows())
				assert.Empty(t, e.pending())
				assert.Zero(t, e.timerRows())
			}
			for i := uint64(1); i <= 3; i++ {
				v, ok, err := e.s.Get(ctx, branch, mustKey(t, wdKey("ada", i)))
				require.NoError(t, err)
				require.True(t, ok, "a withdrawal stays once acknowledged")
				w, err := bankgen.DecodeWithdrawalV1(v)
				require.NoError(t, err)
				assert.Equal(t, bankgen.StateSettled, w.State)
				_, ok, err = e.s.Get(ctx, branch, mustKey(t, trKey("ada", i)))
				require.NoError(t, err)
				assert.Equal(t, i == 2, ok, "a transfer goes once acknowledged; transfer 2 was never settled")
			}
		})
	}
}

// A pending row of a source the Delivery does not have, or whose record
// its source cannot make an outcome of, is kept and logged, and holds up
// no row behind it.
func TestAPendingRowOfAnUnknownSourceIsKeptAndHoldsUpNoRow(t *testing.T) {
	e := newEnvOn(t, testengine.Memory, bankT0)
	e.p = branch
	bk := &bankSvc{t: t, s: e.s, clock: e.clock,
		withdrawals: newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord), transfers: newTransferSource(t)}
	bk.open(branch, "ada", 3)
	bk.settle(branch, "ada", 1, true)
	bk.settle(branch, "ada", 2, false)
	// Withdrawal 2's record is rewritten behind the source's back: it is
	// no longer terminal.
	pending, err := bankgen.EncodeWithdrawalV1(bankgen.WithdrawalV1{State: bankgen.StatePending})
	require.NoError(t, err)
	out, err := e.s.Apply(ctx, branch, store.NewBatch().Put(mustKey(t, wdKey("ada", 2)), pending))
	require.NoError(t, err)
	require.True(t, out.Committed())
	bk.settle(branch, "ada", 3, false)

	// A Delivery without the transfers' source.
	sink := &capture{}
	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{bk.withdrawals}, Sleep: (&manualSleep{}).Sleep})
	require.NoError(t, err)
	e.fireWith(d, bankT0)
	var ids []string
	for _, env := range sink.envelopes() {
		ids = append(ids, env.ID)
	}
	assert.Equal(t, []string{"wd_ada_1", "wd_ada_3"}, ids)
	assert.Equal(t, uint64(2), e.backlogRows(), "tr_ada_1 and wd_ada_2 stay")
	logs := e.logs.String()
	assert.Contains(t, logs, "pending outcome of a source the delivery does not have; retaining")
	assert.Contains(t, logs, "source=bank.transfers")
	assert.Contains(t, logs, "indexed outcome cannot be delivered; retaining")
	assert.Contains(t, logs, "outcome=wd_ada_2")

	// The Delivery that has it delivers it.
	due := e.timerDue()
	e.clock.Set(due)
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) { c.Sources = []outcome.Source{bk.withdrawals, bk.transfers} }), due)
	assert.Equal(t, "tr_ada_1", sink.envelopes()[2].ID)
	assert.Equal(t, uint64(1), e.backlogRows(), "wd_ada_2 stays until repaired")
}

// A pending row whose value does not decode is kept and logged; a legacy
// row (an empty value) is kept and logged when no source resolves such
// rows.
func TestCorruptAndLegacyPendingRowsAreKept(t *testing.T) {
	e := newEnvOn(t, testengine.Memory, bankT0)
	e.p = branch
	bk := &bankSvc{t: t, s: e.s, clock: e.clock,
		withdrawals: newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord), transfers: newTransferSource(t)}
	bk.open(branch, "ada", 3)
	bk.settle(branch, "ada", 1, false)
	bk.settle(branch, "ada", 2, false)
	bk.settle(branch, "ada", 3, false)
	rows := e.pending()
	require.Len(t, rows, 3)
	out, err := e.s.Apply(ctx, branch, store.NewBatch().Put(rows[0].Key, store.Value{gen.VersionOutcomePendingV1, 0xde, 0xad}).Put(rows[1].Key, store.Value{}))
	require.NoError(t, err)
	require.True(t, out.Committed())
	sink := &capture{}
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) { c.Sources = []outcome.Source{bk.withdrawals} }), bankT0)
	require.Len(t, sink.envelopes(), 1)
	assert.Equal(t, "wd_ada_3", sink.envelopes()[0].ID)
	assert.Equal(t, uint64(2), e.backlogRows())
	assert.Contains(t, e.logs.String(), "invalid outcome index row; retaining")
	assert.Contains(t, e.logs.String(), "names no source (queued before sources) and no source resolves such rows; retaining")
}

// A pending row of a newer version than this binary reads, and a pending
// row whose record is of a newer version (read through its family's
// Decode), are kept and passed over, holding up no row behind them,
// logged and counted as newer (mkitfdb_outcome_newer_rows_total), never as
// corrupt; once readable (a binary that reads them would deliver them;
// here they are rewritten in this binary's version) they are delivered.
func TestNewerPendingRowsAndRecordsAreKeptAndCounted(t *testing.T) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			e := newEnvOn(t, eng, bankT0)
			e.p = branch
			cfg := bank.WithdrawalConfig("bank.withdrawals", outcome.KeepRecord)
			cfg.Decode = bankgen.NewWithdrawalKeyValues(struct{}{}).Decode
			withdrawals, err := outcome.NewSource(cfg)
			require.NoError(t, err)
			bk := &bankSvc{t: t, s: e.s, clock: e.clock, withdrawals: withdrawals, transfers: newTransferSource(t)}
			bk.open(branch, "ada", 3)
			for seq := range uint64(3) {
				bk.settle(branch, "ada", seq+1, false)
			}
			rows := e.pending()
			require.Len(t, rows, 3)
			record := mustKey(t, wdKey("ada", 2))
			stored, _, err := e.s.Get(ctx, branch, record)
			require.NoError(t, err)
			// A version byte above the newest of each family this binary reads.
			newer := func(v store.Value, newest byte) store.Value { return append(store.Value{newest + 1}, v[1:]...) }
			out, err := e.s.Apply(ctx, branch, store.NewBatch().Put(rows[0].Key, newer(rows[0].Value, gen.VersionOutcomePendingV2)).Put(record, newer(stored, stored[0])))
			require.NoError(t, err)
			require.True(t, out.Committed())

			sink := &capture{}
			metrics := telemetry.NewRecorder()
			d := delivery(t, sink, func(c *outcome.DeliveryConfig) {
				c.Sources, c.Metrics = []outcome.Source{withdrawals}, metrics
			})
			e.fireWith(d, bankT0)
			require.Len(t, sink.envelopes(), 1)
			assert.Equal(t, "wd_ada_3", sink.envelopes()[0].ID, "the rows behind are delivered")
			assert.Equal(t, uint64(2), e.backlogRows(), "kept")
			logs := e.logs.String()
			assert.Contains(t, logs, "pending outcome of a newer version than this binary reads; retaining")
			assert.Contains(t, logs, "terminal outcome of a newer version than this binary reads; retaining")
			assert.NotContains(t, logs, "invalid outcome index row")
			assert.NotContains(t, logs, "undecodable")
			pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: branch.Kind()}
			assert.Equal(t, uint64(2), metrics.Counter(telemetry.MetricOutcomeNewerRows, pk))
			require.NoError(t, metrics.Err())

			out, err = e.s.Apply(ctx, branch, store.NewBatch().Put(rows[0].Key, rows[0].Value).Put(record, stored))
			require.NoError(t, err)
			require.True(t, out.Committed())
			due := e.timerDue()
			e.clock.Set(due)
			e.fireWith(d, due)
			var ids []string
			for _, env := range sink.envelopes() {
				ids = append(ids, env.ID)
			}
			assert.ElementsMatch(t, []string{"wd_ada_3", "wd_ada_1", "wd_ada_2"}, ids)
			assert.Zero(t, e.backlogRows())
		})
	}
}

func TestNewSourceRejectsBadConfig(t *testing.T) {
	good := func() outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1] {
		return outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]{
			Name: "bank.withdrawals", Namespace: bankgen.SchemaNamespace, ParseKey: bankgen.ParseWithdrawalKey, Decode: bankgen.DecodeWithdrawalV1, Encode: outcome.OneVersion(bankgen.EncodeWithdrawalV1),
			Terminal: func(w bankgen.WithdrawalV1) bool { return settledOrFailed(w.State) }, ID: withdrawalID, Event: withdrawalEvent, OnAck: outcome.KeepRecord,
		}
	}
	for name, change := range map[string]func(*outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]){
		"no name":       func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Name = "" },
		"upper case":    func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Name = "Bank" },
		"leading digit": func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Name = "1bank" },
		"space": func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) {
			c.Name = "bank withdrawals"
		},
		"too long": func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) {
			c.Name = "b" + fmt.Sprintf("%064d", 0)
		},
		"no Namespace":     func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Namespace = "" },
		"no ParseKey":      func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.ParseKey = nil },
		"no Decode":        func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Decode = nil },
		"no Encode":        func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Encode = nil },
		"no Terminal":      func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Terminal = nil },
		"no ID":            func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.ID = nil },
		"no Event":         func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.Event = nil },
		"no OnAck":         func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.OnAck = 0 },
		"an unknown OnAck": func(c *outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]) { c.OnAck = 3 },
	} {
		t.Run(name, func(t *testing.T) {
			c := good()
			change(&c)
			_, err := outcome.NewSource(c)
			assert.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	src, err := outcome.NewSource(good())
	require.NoError(t, err)
	assert.Equal(t, "bank.withdrawals", src.Name())
	c := good()
	c.Name = "b" + fmt.Sprintf("%063d", 0)
	_, err = outcome.NewSource(c)
	assert.NoError(t, err, "a name of MaxSourceNameBytes")
}

// Append checks the source's rules and appends nothing when one is
// broken.
func TestSourceAppendChecksItsRules(t *testing.T) {
	e := newEnvOn(t, testengine.Memory, bankT0)
	e.p = branch
	src := newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord)
	enc := func(w bankgen.WithdrawalV1) store.Value {
		v, err := bankgen.EncodeWithdrawalV1(w)
		require.NoError(t, err)
		return v
	}
	pending, settled := enc(bankgen.WithdrawalV1{State: bankgen.StatePending}), bankgen.WithdrawalV1{State: bankgen.StateSettled, SettledAtMs: 5}
	badID, err := outcome.NewSource(outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]{
		Name: "bank.bad", Namespace: bankgen.SchemaNamespace, ParseKey: bankgen.ParseWithdrawalKey, Decode: bankgen.DecodeWithdrawalV1, Encode: outcome.OneVersion(bankgen.EncodeWithdrawalV1),
		Terminal: func(w bankgen.WithdrawalV1) bool { return settledOrFailed(w.State) },
		ID:       func(bankgen.WithdrawalKey, bankgen.WithdrawalV1) string { return "has space" }, Event: withdrawalEvent, OnAck: outcome.KeepRecord,
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		fn   func(ob *outbox.Builder) error
		says string
	}{
		{"a key that does not encode", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, bankgen.WithdrawalKey{Seq: 1}, pending, settled)
			return err
		}, "key: WithdrawalKey.Account"},
		{"no prior", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, wdKey("a", 1), nil, settled)
			return err
		}, "the record must exist"},
		{"a prior of another class", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, wdKey("a", 1), store.Value("junk"), settled)
			return err
		}, "prior value does not decode"},
		{"a terminal prior", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, wdKey("a", 1), enc(settled), settled)
			return err
		}, "already terminal"},
		{"a terminal value that is not", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, wdKey("a", 1), pending, bankgen.WithdrawalV1{State: bankgen.StatePending})
			return err
		}, "record is not terminal"},
		{"a terminal value that does not encode", func(ob *outbox.Builder) error {
			_, err := src.Append(context.Background(), ob, wdKey("a", 1), pending, bankgen.WithdrawalV1{State: 9})
			return err
		}, "terminal value"},
		{"an id that is no envelope id", func(ob *outbox.Builder) error {
			_, err := badID.Append(context.Background(), ob, wdKey("a", 1), pending, settled)
			return err
		}, `id "has space"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := outbox.Read(ctx, store.ReaderOf(e.s, branch))
			require.NoError(t, err)
			ob, err := outbox.NewBuilder(e.s, time.UnixMilli(1), o)
			require.NoError(t, err)
			err = tc.fn(ob)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.ErrorContains(t, err, tc.says)
			assert.Zero(t, ob.Len())
		})
	}
	// The row it appends names the source and the record.
	o, err := outbox.Read(ctx, store.ReaderOf(e.s, branch))
	require.NoError(t, err)
	ob, err := outbox.NewBuilder(e.s, time.UnixMilli(1234), o)
	require.NoError(t, err)
	seq, err := src.Append(context.Background(), ob, wdKey("a", 1), pending, settled)
	require.NoError(t, err)
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	pk, err := gen.AppendOutcomePendingKey(nil, seq, gen.MustOutcomeID("wd_a_1"))
	require.NoError(t, err)
	for _, w := range b.Writes {
		if string(w.Key) == string(pk) {
			pv, err := gen.DecodeOutcomePendingV1(w.Value)
			require.NoError(t, err)
			assert.Equal(t, gen.OutcomePendingV1{Source: gen.MustOutcomeSource("bank.withdrawals"), Key: mustKey(t, wdKey("a", 1)), AtMs: 1234}, pv)
			return
		}
	}
	t.Fatal("no pending row")
}
