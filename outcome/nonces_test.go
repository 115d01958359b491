package outcome_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

func partitionNonces(t testing.TB, s store.Store, p store.Partition, cfg ...func(*outcome.PartitionNonceStoreConfig)) *outcome.PartitionNonceStore {
	c := outcome.PartitionNonceStoreConfig{Store: s, Partition: p}
	for _, f := range cfg {
		f(&c)
	}
	n, err := outcome.NewPartitionNonceStore(c)
	require.NoError(t, err)
	return n
}

// claim1 claims one key for the sender "s".
func claim1(n outcome.NonceStore, key string, until, now time.Time) (outcome.NonceClaim, error) {
	return n.Claim(ctx, "s", []outcome.NonceKey{{Key: key, Until: until}}, now)
}

// nonceRows reads a partition's nonce rows and index rows, and checks
// that they match one to one, each index row holding its row's value. It
// keys them by sender and key, "sender key".
func nonceRows(t testing.TB, s store.Store, p store.Partition) map[string]gen.ReceiverNonceV1 {
	t.Helper()
	read := func(tag gen.Tag) []store.KeyValue {
		start, end := gen.ClassRange(tag)
		page, err := s.Scan(ctx, p, start, end, nil, 10_000)
		require.NoError(t, err)
		require.Nil(t, page.Next)
		return page.Entries
	}
	rows := map[string]gen.ReceiverNonceV1{}
	values := map[string]store.Value{}
	for _, kv := range read(gen.TagReceiverReplayKey) {
		k, err := gen.ParseReceiverReplayKey(kv.Key)
		require.NoError(t, err)
		v, err := gen.DecodeReceiverNonceV1(kv.Value)
		require.NoError(t, err)
		rows[k.Sender+" "+k.Key], values[k.Sender+" "+k.Key] = v, kv.Value
	}
	index := read(gen.TagReceiverReplayExpiryKey)
	require.Len(t, index, len(rows), "one index row per nonce row")
	for _, kv := range index {
		k, err := gen.ParseReceiverReplayExpiryKey(kv.Key)
		require.NoError(t, err)
		name := k.Sender + " " + k.Key
		require.Contains(t, values, name)
		require.Equal(t, values[name], kv.Value, "the index row holds its row's value")
		require.Equal(t, rows[name].UntilMs, k.UntilMs)
	}
	return rows
}

// Two replicas behind a load balancer share a PartitionNonceStore: a
// request the first accepted is refused by the second, and by a
// receiver restarted over the same store; for both schemes, on every
// engine.
func TestReplicasSharingAPartitionNonceStoreRefuseAReplay(t *testing.T) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			e := newEnvOn(t, eng, time.UnixMilli(1_700_000_000_000))
			key := hmacKey(t, hmacSecret)
			replica := func() *receiverServer {
				return newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key},
					Clock: e.clock, Nonces: partitionNonces(t, e.s, e.p), Sender: "shop"})
			}
			first, second := replica(), replica()
			rec := newRecorder(t, nil)
			lib := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) { c.Clock = e.clock })
			require.NoError(t, lib.Deliver(ctx, sampleEnvelope(t, "lib")))
			body, err := sampleEnvelope(t, "msg_std").JSON()
			require.NoError(t, err)
			std := request{header: officialRequest(t, "msg_std", e.clock.Now(), body, "whsec_"+base64.StdEncoding.EncodeToString(hmacSecret)), body: body}
			for _, r := range []request{rec.requests()[0], std} {
				assert.Equal(t, http.StatusNoContent, post(t, first.srv.URL, r.header, r.body).StatusCode, "the first replica accepts")
				assert.Equal(t, http.StatusUnauthorized, post(t, second.srv.URL, r.header, r.body).StatusCode, "the second refuses the replay")
				restarted := replica()
				assert.Equal(t, http.StatusUnauthorized, post(t, restarted.srv.URL, r.header, r.body).StatusCode, "a restarted receiver refuses it")
			}
			assert.Len(t, first.envelopes(), 2)
			assert.Empty(t, second.envelopes())
			rows := nonceRows(t, e.s, e.p)
			assert.Len(t, rows, 4, "each request's own key and its attempt's")
			assert.Contains(t, rows, "shop webhook-id:msg_std")
		})
	}
}

// Replicas racing on the same requests, over an engine whose overlapping
// transactions conflict as FoundationDB's do, accept each exactly once;
// also when commits report unknown results (landed or not), which a
// claim resolves by its token or refuses with ErrBusy, never by
// accepting twice.
func TestReplicasRacingOnARequestAcceptItOnce(t *testing.T) {
	for _, eng := range []testengine.Engine{testengine.MVCC, {Name: "mvcc-unknown-results", Open: func(testing.TB, string) kv.Engine {
		return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{UnknownLanded: 0.2, UnknownNotLanded: 0.1, Seed: 7})
	}}} {
		t.Run(eng.Name, func(t *testing.T) { raceReplicas(t, eng) })
	}
}

func raceReplicas(t *testing.T, eng testengine.Engine) {
	e := newEnvOn(t, eng, time.UnixMilli(1_700_000_000_000))
	key := hmacKey(t, hmacSecret)
	const replicas, requests = 4, 24
	recvs := make([]*outcome.Receiver, replicas)
	for i := range recvs {
		r, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Clock: e.clock,
			Nonces: partitionNonces(t, e.s, e.p, func(c *outcome.PartitionNonceStoreConfig) { c.SweepEvery = 3 }), Sender: "shop"})
		require.NoError(t, err)
		recvs[i] = r
	}
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) { c.Clock = e.clock })
	for i := range requests {
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, fmt.Sprintf("r%d", i))))
	}
	var accepted [requests]atomic.Int32
	var wg sync.WaitGroup
	for i, r := range rec.requests() {
		for _, recv := range recvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(r.body))
				req.Header = r.header.Clone()
				_, err := recv.Verify(req)
				switch {
				case err == nil:
					accepted[i].Add(1)
				case errors.Is(err, outcome.ErrBusy) && eng.Name != testengine.MVCC.Name:
					// The store could not tell: refused, the sender retries.
				case !errors.Is(err, outcome.ErrReplayed):
					t.Errorf("request %d: %v", i, err)
				}
			}()
		}
	}
	wg.Wait()
	for i := range accepted {
		assert.Equal(t, int32(1), accepted[i].Load(), "request %d accepted once", i)
	}
	assert.Len(t, nonceRows(t, e.s, e.p), requests)
}

// A claim whose commit landed but reported an unknown result knows its
// own row and is accepted, not refused as its own replay; a store that
// fails refuses the request with 503, accepting nothing unchecked, and
// the sender's retry is accepted once the store is back.
func TestPartitionNonceStoreUnderFaults(t *testing.T) {
	e := newEnv(t, time.UnixMilli(1_700_000_000_000))
	faults := storetest.NewFaults(e.s)
	key := hmacKey(t, hmacSecret)
	rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Clock: e.clock, Nonces: partitionNonces(t, faults, e.p), Sender: "shop"})
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) { c.Clock = e.clock })
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "unknown")))
	r := rec.requests()[0]
	faults.CommitThenFailNext()
	assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, r.header, r.body).StatusCode, "its own landed claim")
	assert.Equal(t, http.StatusUnauthorized, post(t, rs.srv.URL, r.header, r.body).StatusCode, "a replay is refused")

	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "down")))
	down := rec.requests()[1]
	faults.FailWhen(storetest.MethodApply, nil, nil)
	faults.FailWhen(storetest.MethodTransact, nil, nil)
	faults.FailWhen(storetest.MethodGet, nil, nil)
	resp := post(t, rs.srv.URL, down.header, down.body)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	faults.Clear()
	assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, down.header, down.body).StatusCode, "nothing was recorded by the failed check")
	assert.Len(t, rs.envelopes(), 2)
	assert.Len(t, nonceRows(t, e.s, e.p), 2)
}

// sameClock is a replica skew bound of a millisecond: replicas whose
// clocks agree, so that a sweep deletes what expired a millisecond ago.
func sameClock(c *outcome.PartitionNonceStoreConfig) { c.MaxReplicaSkew = time.Millisecond }

func TestPartitionNonceStoreSweepsExpiredRows(t *testing.T) {
	e := newEnv(t, bankT0)
	n := partitionNonces(t, e.s, e.p, sameClock, func(c *outcome.PartitionNonceStoreConfig) { c.SweepEvery = -1 })
	now := e.clock.Now()
	for i := range 70 {
		_, err := claim1(n, fmt.Sprintf("old-%02d", i), now.Add(time.Second), now)
		require.NoError(t, err)
	}
	for i := range 5 {
		_, err := claim1(n, fmt.Sprintf("new-%d", i), now.Add(time.Hour), now)
		require.NoError(t, err)
	}
	deleted, err := n.Sweep(ctx, now.Add(time.Second))
	require.NoError(t, err)
	assert.Zero(t, deleted, "nothing expired yet: an expiry equal to now is unexpired")
	later := now.Add(2 * time.Second)
	total := 0
	for {
		deleted, err := n.Sweep(ctx, later)
		require.NoError(t, err)
		assert.LessOrEqual(t, deleted, 32, "bounded work per sweep")
		if deleted == 0 {
			break
		}
		total += deleted
	}
	assert.Equal(t, 70, total)
	rows := nonceRows(t, e.s, e.p)
	assert.Len(t, rows, 5, "the unexpired rows are kept")

	// Claims sweep by themselves: the partition holds what is unexpired
	// and a bounded remainder, however many keys went through it.
	auto := partitionNonces(t, e.s, e.p, sameClock)
	for i := range 400 {
		at := later.Add(time.Duration(i) * 100 * time.Millisecond)
		_, err := claim1(auto, fmt.Sprintf("k%d", i), at.Add(time.Second), at)
		require.NoError(t, err)
	}
	assert.Less(t, len(nonceRows(t, e.s, e.p)), 5+10+2*32, "unexpired (10) and a bounded remainder")
}

// A sweep that read an expired row which a claim takes over before the
// sweep commits deletes nothing of the new claim: its delete is guarded
// by the value it read.
func TestSweepRacingATakeoverKeepsTheNewClaim(t *testing.T) {
	e := newEnv(t, bankT0)
	faults := storetest.NewFaults(e.s)
	sweeper := partitionNonces(t, faults, e.p, sameClock, func(c *outcome.PartitionNonceStoreConfig) { c.SweepEvery = -1 })
	other := partitionNonces(t, e.s, e.p, sameClock, func(c *outcome.PartitionNonceStoreConfig) { c.SweepEvery = -1 })
	now := e.clock.Now()
	_, err := claim1(other, "id", now.Add(time.Second), now)
	require.NoError(t, err)
	later := now.Add(2 * time.Second)
	raced := 0
	faults.BeforeApply(func(context.Context, store.Partition, *store.Batch) error {
		if raced++; raced == 1 {
			_, err := claim1(other, "id", later.Add(time.Minute), later)
			require.NoError(t, err, "the expired key is taken over between the sweep's read and its commit")
		}
		return nil
	})
	deleted, err := sweeper.Sweep(ctx, later)
	require.NoError(t, err)
	assert.Zero(t, deleted, "the re-run finds nothing expired")
	assert.Equal(t, 1, raced, "the guarded batch failed, and its re-run had nothing to apply")
	_, err = claim1(other, "id", later.Add(time.Minute), later)
	assert.ErrorIs(t, err, outcome.ErrReplayed, "the new claim is held")
	rows := nonceRows(t, e.s, e.p)
	assert.Equal(t, uint64(later.Add(time.Minute).UnixMilli()), rows["s id"].UntilMs)
}

func TestNonceStoresTakeOverExpiredKeysAndReleaseOnlyTheirOwn(t *testing.T) {
	e := newEnv(t, bankT0)
	now := e.clock.Now()
	for name, n := range map[string]outcome.NonceStore{"memory": outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{}), "partition": partitionNonces(t, e.s, e.p)} {
		t.Run(name, func(t *testing.T) {
			first, err := claim1(n, "id", now.Add(time.Second), now)
			require.NoError(t, err)
			_, err = claim1(n, "id", now.Add(time.Minute), now.Add(time.Second))
			assert.ErrorIs(t, err, outcome.ErrReplayed, "held until its expiry, inclusive")
			assert.ErrorIs(t, err, outcome.ErrRejected)
			later := now.Add(time.Second + time.Millisecond)
			second, err := claim1(n, "id", later.Add(time.Minute), later)
			require.NoError(t, err, "an expired key is taken over")
			require.NoError(t, n.Release(ctx, first), "releasing a claim no longer held")
			_, err = claim1(n, "id", later.Add(time.Minute), later)
			assert.ErrorIs(t, err, outcome.ErrReplayed, "the later claim is kept")
			require.NoError(t, n.Release(ctx, second))
			_, err = claim1(n, "id", later.Add(time.Minute), later)
			assert.NoError(t, err, "released")

			_, err = claim1(n, "expired", now, now.Add(time.Millisecond))
			assert.ErrorIs(t, err, outcome.ErrRejected, "an expiry already past is never recorded")
			assert.NotErrorIs(t, err, outcome.ErrReplayed)
			_, err = claim1(n, "", later, now)
			assert.ErrorIs(t, err, store.ErrInvalid)
			_, err = claim1(n, string(make([]byte, outcome.MaxNonceKeyBytes+1)), later, now)
			assert.ErrorIs(t, err, store.ErrInvalid)
			key := func(k string) outcome.NonceKey { return outcome.NonceKey{Key: k, Until: later} }
			for name, keys := range map[string][]outcome.NonceKey{
				"no keys": nil, "a key twice": {key("a"), key("b"), key("a")},
				"too many keys": {key("a"), key("b"), key("c"), key("d"), key("e")},
			} {
				_, err = n.Claim(ctx, "s", keys, now)
				assert.ErrorIs(t, err, store.ErrInvalid, name)
			}
			_, err = n.Claim(ctx, strings.Repeat("s", outcome.MaxSenderBytes+1), []outcome.NonceKey{key("a")}, now)
			assert.ErrorIs(t, err, store.ErrInvalid, "a sender too long")

			// A claim is all or none, and each sender's keys are its own.
			_, err = n.Claim(ctx, "s", []outcome.NonceKey{key("fresh"), key("id")}, later)
			assert.ErrorIs(t, err, outcome.ErrReplayed, "one of its keys is held")
			_, err = n.Claim(ctx, "s", []outcome.NonceKey{key("fresh")}, later)
			assert.NoError(t, err, "nothing of the refused claim was recorded")
			other, err := n.Claim(ctx, "t", []outcome.NonceKey{key("fresh"), key("id")}, later)
			assert.NoError(t, err, "another sender's keys")
			require.NoError(t, n.Release(ctx, other))
		})
	}
	assert.Len(t, nonceRows(t, e.s, e.p), 2)
}

func TestMemoryNonceStoreIsBounded(t *testing.T) {
	n := outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{MaxNonces: 2})
	now := time.UnixMilli(1_000_000)
	for _, k := range []string{"a", "b"} {
		_, err := claim1(n, k, now.Add(time.Second), now)
		require.NoError(t, err)
	}
	_, err := claim1(n, "c", now.Add(time.Second), now)
	assert.ErrorIs(t, err, outcome.ErrBusy)
	_, err = claim1(n, "c", now.Add(2*time.Second), now.Add(time.Second+time.Millisecond))
	assert.NoError(t, err, "accepted once the others expired")
	assert.Equal(t, 1, n.Len())
}

// A corrupt nonce row, of either layout, refuses its request (503),
// never accepts it; a corrupt index row is reported by the sweep and
// kept, and the others are swept.
func TestPartitionNonceStoreCorruptRows(t *testing.T) {
	for _, layout := range []string{"sender", "first"} {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t, bankT0)
			n := partitionNonces(t, e.s, e.p, sameClock, func(c *outcome.PartitionNonceStoreConfig) { c.SweepEvery = -1 })
			now := e.clock.Now()
			rowKey, err := gen.AppendReceiverReplayKey(nil, "s", "bad")
			require.NoError(t, err)
			idxKey, err := gen.AppendReceiverReplayExpiryKey(nil, uint64(now.UnixMilli()), "s", "bad")
			require.NoError(t, err)
			if layout == "first" {
				rowKey, err = gen.AppendReceiverNonceKey(nil, "bad")
				require.NoError(t, err)
				idxKey, err = gen.AppendReceiverNonceExpiryKey(nil, uint64(now.UnixMilli()), "bad")
				require.NoError(t, err)
			}
			out, err := e.s.Apply(ctx, e.p, store.NewBatch().Put(rowKey, store.Value{0xff}).Put(idxKey, store.Value{0xff}))
			require.NoError(t, err)
			require.True(t, out.Committed())
			_, err = claim1(n, "bad", now.Add(time.Second), now)
			assert.ErrorIs(t, err, store.ErrCorrupt)
			assert.NotErrorIs(t, err, outcome.ErrRejected)
			_, err = claim1(n, "good", now.Add(time.Millisecond), now)
			require.NoError(t, err)
			deleted, err := n.Sweep(ctx, now.Add(time.Second))
			assert.ErrorIs(t, err, store.ErrCorrupt)
			assert.Equal(t, 1, deleted)
			v, ok, err := e.s.Get(ctx, e.p, idxKey)
			require.NoError(t, err)
			assert.True(t, ok, "the corrupt row is kept")
			assert.Equal(t, store.Value{0xff}, v)
		})
	}
}

// nonceModel is what a NonceStore must answer: each sender's key's
// expiry and the claim holding it.
type nonceModel struct {
	held map[string]modelClaim // by "sender key"
}

type modelClaim struct {
	until time.Time
	id    int
}

// TestNonceStoresMatchTheModel runs random claims of one to three keys
// for two senders, releases, sweeps and clock moves against both stores
// and a model, the partition store under injected faults (failed calls,
// commits that land and report an unknown result) and with a replica skew
// bound of its own, and checks every answer and, for the partition store,
// its rows: none held by a claim is swept within the bound.
func TestNonceStoresMatchTheModel(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		for _, kind := range []string{"memory", "partition"} {
			t.Run(fmt.Sprintf("%s/seed=%d", kind, seed), func(t *testing.T) {
				runNonceModel(t, kind, seed)
			})
		}
	}
}

func runNonceModel(t *testing.T, kind string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e := newEnv(t, bankT0)
	faults := storetest.NewFaults(e.s)
	var n outcome.NonceStore
	var pn *outcome.PartitionNonceStore
	skew := []time.Duration{time.Millisecond, 700 * time.Millisecond, 3 * time.Second}[seed%3]
	if kind == "memory" {
		n = outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{})
	} else {
		pn = partitionNonces(t, faults, e.p, func(c *outcome.PartitionNonceStoreConfig) {
			c.SweepEvery = 1 + int(seed%4)
			c.MaxReplicaSkew = skew
		})
		n = pn
	}
	m := nonceModel{held: map[string]modelClaim{}}
	type claimed struct {
		c  outcome.NonceClaim
		id int
	}
	var claims []claimed
	now := e.clock.Now()
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op < 6:
			sender := []string{"x", "y"}[rng.IntN(2)]
			var keys []outcome.NonceKey
			for _, i := range rng.Perm(6)[:1+rng.IntN(3)] {
				keys = append(keys, outcome.NonceKey{Key: fmt.Sprintf("k%d", i), Until: now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)})
			}
			fault := ""
			if pn != nil {
				switch rng.IntN(8) {
				case 0:
					faults.CommitThenFailNext()
					fault = "unknown"
				case 1:
					faults.FailNext(storetest.MethodTransact, nil)
					fault = "fail"
				}
			}
			c, err := n.Claim(ctx, sender, keys, now)
			faults.Clear()
			replayed := slices.ContainsFunc(keys, func(k outcome.NonceKey) bool {
				held, ok := m.held[sender+" "+k.Key]
				return ok && !held.until.Before(now)
			})
			switch {
			case fault == "fail":
				require.Error(t, err, "step %d", step)
				require.NotErrorIs(t, err, outcome.ErrRejected, "step %d: a failing store is not a replay", step)
			case replayed:
				require.ErrorIs(t, err, outcome.ErrReplayed, "step %d: %s %v, now %v", step, sender, keys, now)
			default:
				require.NoError(t, err, "step %d: %s %v (%s)", step, sender, keys, fault)
				for _, k := range keys {
					m.held[sender+" "+k.Key] = modelClaim{until: k.Until, id: step}
				}
				claims = append(claims, claimed{c, step})
			}
		case op < 8 && len(claims) > 0:
			cl := claims[rng.IntN(len(claims))]
			require.NoError(t, n.Release(ctx, cl.c))
			for _, k := range cl.c.Keys {
				if h, ok := m.held[cl.c.Sender+" "+k.Key]; ok && h.id == cl.id {
					delete(m.held, cl.c.Sender+" "+k.Key)
				}
			}
		case op == 8 && pn != nil:
			_, err := pn.Sweep(ctx, now)
			require.NoError(t, err)
		default:
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		if pn != nil {
			rows := nonceRows(t, e.s, e.p)
			for key, h := range m.held {
				if h.until.Add(skew).Before(now) {
					continue // expired past the bound: swept or not
				}
				require.Contains(t, rows, key, "step %d: swept within the bound", step)
				require.Equal(t, uint64(h.until.UnixMilli()), rows[key].UntilMs, "step %d", step)
			}
			for key, r := range rows {
				if h, ok := m.held[key]; !ok || uint64(h.until.UnixMilli()) != r.UntilMs {
					require.Less(t, r.UntilMs, uint64(now.UnixMilli()), "step %d: %s is held by no claim, yet unexpired", step, key)
				}
			}
		}
	}
}
