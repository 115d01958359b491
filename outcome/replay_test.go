package outcome_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
)

// These tests attack replay protection where it used to fail: across the
// two schemes of one attempt, across replicas whose clocks differ, across
// the senders sharing a store, and with a body that never arrives.

// strip returns a copy of h without names.
func strip(h http.Header, names ...string) http.Header {
	h = h.Clone()
	for _, n := range names {
		h.Del(n)
	}
	return h
}

// schemeVariants are what an attacker makes of one attempt the sink
// signed under both schemes: the request itself, the request without its
// library signature (a Standard Webhooks request), and the request
// without its Standard Webhooks headers (a request of the library's
// scheme only).
func schemeVariants(r request) map[string]request {
	return map[string]request{
		"both":     r,
		"standard": {header: strip(r.header, outcome.HeaderSignature), body: r.body},
		"library": {header: strip(r.header, outcome.HeaderWebhookID, outcome.HeaderWebhookTimestamp, outcome.HeaderWebhookSignature),
			body: r.body},
	}
}

// A receiver of both schemes on one key accepts one attempt at most once,
// whichever scheme each copy of it arrives under and in whatever order;
// with the default store and with a PartitionNonceStore.
func TestReceiverAcceptsAnAttemptOnceWhateverItsScheme(t *testing.T) {
	orders := [][]string{
		{"both", "standard"}, {"standard", "both"},
		{"both", "library"}, {"library", "both"},
		{"library", "standard"}, {"standard", "library"},
		{"standard", "library", "both"}, {"library", "standard", "both"},
	}
	for _, storeName := range []string{"memory", "partition"} {
		for _, order := range orders {
			t.Run(storeName+"/"+strings.Join(order, ","), func(t *testing.T) {
				e := newEnv(t, time.UnixMilli(1_700_000_000_123))
				key := hmacKey(t, hmacSecret)
				cfg := outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key}, Clock: e.clock}
				if storeName == "partition" {
					cfg.Nonces, cfg.Sender = partitionNonces(t, e.s, e.p), "shop"
				}
				rs := newReceiverServer(t, cfg)
				rec := newRecorder(t, nil)
				sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
					c.Clock = e.clock
					c.StandardWebhooks = true
				})
				require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "ord_1")))
				variants := schemeVariants(rec.requests()[0])
				accepted := 0
				for i, name := range order {
					v := variants[name]
					e.clock.Advance(time.Second)
					code := post(t, rs.srv.URL, v.header, v.body).StatusCode
					if i == 0 {
						assert.Equal(t, http.StatusNoContent, code, "the first copy (%s) is accepted", name)
					} else {
						assert.Equal(t, http.StatusUnauthorized, code, "copy %d (%s) is a replay", i, name)
					}
					if code == http.StatusNoContent {
						accepted++
					}
				}
				assert.Equal(t, 1, accepted)
				assert.Equal(t, 1, len(rs.envelopes()), "the handler saw the attempt once")
			})
		}
	}
}

// A receiver of both schemes still takes the sender's retries as each
// specification expects: a new attempt of a message (a new nonce, a later
// timestamp) is accepted under the library's scheme, whose replay key is
// the attempt, and the handler deduplicates it; under Standard Webhooks a
// message id is held after a 2xx and released after a failure.
func TestReceiverOfBothSchemesTakesRetriesAsEachSchemeSays(t *testing.T) {
	e := newEnv(t, time.UnixMilli(1_700_000_000_000))
	key := hmacKey(t, hmacSecret)
	fail := false
	calls := 0
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key}, Clock: e.clock})
	require.NoError(t, err)
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(contextT, outcome.Envelope) error {
		calls++
		if fail {
			return fmt.Errorf("the service's table is down")
		}
		return nil
	})))
	defer srv.Close()
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
		c.Clock = e.clock
		c.StandardWebhooks = true
	})
	attempt := func(id string) request {
		n := len(rec.requests())
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, id)))
		return rec.requests()[n]
	}

	first := attempt("ord_lib")
	assert.Equal(t, http.StatusNoContent, post(t, srv.URL, first.header, first.body).StatusCode)
	e.clock.Advance(time.Second)
	retry := attempt("ord_lib")
	assert.Equal(t, http.StatusNoContent, post(t, srv.URL, retry.header, retry.body).StatusCode,
		"the library's scheme: a new attempt of the message is accepted after a 2xx")
	std := schemeVariants(retry)["standard"]
	assert.Equal(t, http.StatusUnauthorized, post(t, srv.URL, std.header, std.body).StatusCode, "that attempt, replayed as Standard Webhooks")

	// Standard Webhooks: the message id is what is held.
	secret := "whsec_" + base64.StdEncoding.EncodeToString(hmacSecret)
	body, err := sampleEnvelope(t, "msg_std").JSON()
	require.NoError(t, err)
	fail = true
	assert.Equal(t, http.StatusServiceUnavailable, post(t, srv.URL, officialRequest(t, "msg_std", e.clock.Now(), body, secret), body).StatusCode)
	fail = false
	e.clock.Advance(time.Second)
	assert.Equal(t, http.StatusNoContent, post(t, srv.URL, officialRequest(t, "msg_std", e.clock.Now(), body, secret), body).StatusCode,
		"the retry after a failure is accepted at once")
	e.clock.Advance(time.Second)
	assert.Equal(t, http.StatusUnauthorized, post(t, srv.URL, officialRequest(t, "msg_std", e.clock.Now(), body, secret), body).StatusCode,
		"a duplicate of the message inside the window is refused")
	assert.Equal(t, 4, calls)
}

// twoReplicas are two receivers of one sender, of one scheme ("library"
// or "standard"), sharing a partition of one store, each with a
// PartitionNonceStore of its own over it and a clock of its own: fast
// runs skew ahead of slow.
type twoReplicas struct {
	slow, fast           *receiverServer
	slowClock, fastClock *clock.Manual
	slowStore, fastStore *outcome.PartitionNonceStore
}

func newTwoReplicas(t *testing.T, e *env, scheme string, key *outcome.HMACKey, skew time.Duration, cfg func(*outcome.PartitionNonceStoreConfig)) *twoReplicas {
	r := &twoReplicas{slowClock: clock.NewManual(e.clock.Now()),
		fastClock: clock.NewManual(e.clock.Now().Add(skew))}
	noAutoSweep := func(c *outcome.PartitionNonceStoreConfig) {
		c.SweepEvery = -1
		if cfg != nil {
			cfg(c)
		}
	}
	r.slowStore, r.fastStore = partitionNonces(t, e.s, e.p, noAutoSweep), partitionNonces(t, e.s, e.p, noAutoSweep)
	replica := func(clk *clock.Manual, n *outcome.PartitionNonceStore) *receiverServer {
		c := outcome.ReceiverConfig{Clock: clk, Nonces: n, Sender: "shop"}
		if scheme == "library" {
			c.Verifiers = []outcome.Verifier{key}
		} else {
			c.StandardWebhooks = []outcome.Verifier{key}
		}
		return newReceiverServer(t, c)
	}
	r.slow, r.fast = replica(r.slowClock, r.slowStore), replica(r.fastClock, r.fastStore)
	return r
}

// advance moves both replicas' clocks by d.
func (r *twoReplicas) advance(d time.Duration) {
	r.slowClock.Advance(d)
	r.fastClock.Advance(d)
}

// Two replicas whose clocks are 2 s apart share a PartitionNonceStore
// with its default bound: the faster one's sweep, 1 s before the slower
// one's window ends, leaves the row that refuses the replay there.
func TestSweepOfAFasterReplicaOpensNoReplayWindow(t *testing.T) {
	for _, scheme := range []string{"library", "standard"} {
		t.Run(scheme, func(t *testing.T) {
			e := newEnv(t, time.UnixMilli(1_700_000_000_000))
			key := hmacKey(t, hmacSecret)
			r := newTwoReplicas(t, e, scheme, key, 2*time.Second, nil)
			rec := newRecorder(t, nil)
			sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
				c.Clock = r.slowClock
				c.StandardWebhooks = scheme == "standard"
				c.Validity = time.Minute
			})
			require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "ord_skew")))
			req := rec.requests()[0]
			require.Equal(t, http.StatusNoContent, post(t, r.slow.srv.URL, req.header, req.body).StatusCode)

			// The slower replica's window ends at expires-at plus MaxSkew
			// (the library's scheme), or the timestamp plus Tolerance.
			window := time.Minute + outcome.DefaultMaxSkew
			if scheme == "standard" {
				window = outcome.DefaultTolerance
			}
			r.advance(window - time.Second)
			_, err := r.fastStore.Sweep(ctx, r.fastClock.Now())
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, post(t, r.slow.srv.URL, req.header, req.body).StatusCode,
				"a replay to the slower replica 1 s before its window ends is refused")
			assert.Equal(t, 1, len(r.slow.envelopes()))
		})
	}
}

// The bound a PartitionNonceStore states holds exactly: with replicas
// skewed by MaxReplicaSkew, either one ahead, no sweep deletes a row a
// replica's window still admits, up to the last millisecond of that
// window; skewed past the bound, the faster replica's sweep may delete it
// and the replay is accepted, which is why the bound is documented.
func TestReplicaSkewBound(t *testing.T) {
	const bound = 2 * time.Second
	for _, tc := range []struct {
		name   string
		skew   time.Duration
		refuse bool
	}{
		{"no skew", 0, true},
		{"at the bound", bound, true},
		{"1 ms past the bound", bound + time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, time.UnixMilli(1_700_000_000_000))
			key := hmacKey(t, hmacSecret)
			r := newTwoReplicas(t, e, "library", key, tc.skew, func(c *outcome.PartitionNonceStoreConfig) { c.MaxReplicaSkew = bound })
			rec := newRecorder(t, nil)
			sink := webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
				c.Clock = r.slowClock
				c.Validity = time.Minute
			})
			require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "ord_bound")))
			req := rec.requests()[0]
			require.Equal(t, http.StatusNoContent, post(t, r.slow.srv.URL, req.header, req.body).StatusCode)

			// The slower replica's window admits the request up to its last
			// millisecond; the faster one, tc.skew ahead, sweeps then.
			r.advance(time.Minute + outcome.DefaultMaxSkew)
			_, err := r.fastStore.Sweep(ctx, r.fastClock.Now())
			require.NoError(t, err)
			want := http.StatusUnauthorized
			if !tc.refuse {
				want = http.StatusNoContent
			}
			assert.Equal(t, want, post(t, r.slow.srv.URL, req.header, req.body).StatusCode, "the replay to the slower replica")

			// The other way round: the faster replica accepts, the slower
			// sweeps; its clock is behind, so it never deletes early.
			require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "ord_other")))
			other := rec.requests()[1]
			require.Equal(t, http.StatusNoContent, post(t, r.fast.srv.URL, other.header, other.body).StatusCode)
			expires, err := strconv.ParseInt(other.header.Get(outcome.HeaderExpiresAt), 10, 64)
			require.NoError(t, err)
			r.advance(time.UnixMilli(expires).Add(outcome.DefaultMaxSkew).Sub(r.fastClock.Now()))
			_, err = r.slowStore.Sweep(ctx, r.slowClock.Now())
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, post(t, r.fast.srv.URL, other.header, other.body).StatusCode,
				"the replay to the faster replica, in its window's last millisecond")
		})
	}
}

// Receivers of two senders share one store: each sender's message ids
// are its own, so sender Y's genuine ord_1 is accepted after sender X's
// ord_1 was.
func TestOneReplayStoreServesReceiversOfSeveralSenders(t *testing.T) {
	e := newEnv(t, time.UnixMilli(1_700_000_000_000))
	nonces := partitionNonces(t, e.s, e.p)
	keyX := webhookSecret(t, whsec(32, 'x'))
	keyY := webhookSecret(t, whsec(32, 'y'))
	x := newReceiverServer(t, outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{keyX}, Clock: e.clock, Nonces: nonces, Sender: "x"})
	y := newReceiverServer(t, outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{keyY}, Clock: e.clock, Nonces: nonces, Sender: "y"})
	for _, tc := range []struct {
		key *outcome.HMACKey
		rs  *receiverServer
	}{{keyX, x}, {keyY, y}} {
		sink := webhook(t, tc.rs.srv.URL, tc.key, func(c *outcome.WebhookSinkConfig) {
			c.Clock = e.clock
			c.StandardWebhooks = true
		})
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "ord_1")))
		require.Len(t, tc.rs.envelopes(), 1)
	}

	// Each sender's replays are still refused, by its own receiver.
	rec := newRecorder(t, nil)
	require.NoError(t, webhook(t, rec.srv.URL, keyY, func(c *outcome.WebhookSinkConfig) {
		c.Clock = e.clock
		c.StandardWebhooks = true
	}).Deliver(ctx, sampleEnvelope(t, "ord_2")))
	r := rec.requests()[0]
	assert.Equal(t, http.StatusNoContent, post(t, y.srv.URL, r.header, r.body).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, post(t, y.srv.URL, r.header, r.body).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, post(t, x.srv.URL, r.header, r.body).StatusCode, "not X's key")
}

// A sender's keys rotate under one sender name: a request accepted while
// the receiver held the old key is refused by the receiver that holds the
// new one beside it, and by the one holding only the new key, although
// each verifies it under another key.
func TestKeyRotationOpensNoReplay(t *testing.T) {
	oldKey, newKey := hmacKey(t, bytes.Repeat([]byte{1}, 32)), hmacKey(t, bytes.Repeat([]byte{2}, 32))
	for _, scheme := range []string{"library", "standard"} {
		t.Run(scheme, func(t *testing.T) {
			e := newEnv(t, time.UnixMilli(1_700_000_000_000))
			nonces := partitionNonces(t, e.s, e.p)
			receiver := func(keys ...outcome.Verifier) *receiverServer {
				cfg := outcome.ReceiverConfig{Clock: e.clock, Nonces: nonces, Sender: "shop"}
				if scheme == "library" {
					cfg.Verifiers = keys
				} else {
					cfg.StandardWebhooks = keys
				}
				return newReceiverServer(t, cfg)
			}
			rec := newRecorder(t, nil)
			require.NoError(t, webhook(t, rec.srv.URL, newKey, func(c *outcome.WebhookSinkConfig) {
				c.Clock = e.clock
				c.ExtraSigners = []outcome.Signer{oldKey}
				c.StandardWebhooks = scheme == "standard"
			}).Deliver(ctx, sampleEnvelope(t, "ord_rot")))
			r := rec.requests()[0]
			if scheme == "standard" {
				r.header.Del(outcome.HeaderSignature)
			}
			assert.Equal(t, http.StatusNoContent, post(t, receiver(oldKey).srv.URL, r.header, r.body).StatusCode, "accepted under the old key")
			assert.Equal(t, http.StatusUnauthorized, post(t, receiver(newKey, oldKey).srv.URL, r.header, r.body).StatusCode, "while both are held")
			assert.Equal(t, http.StatusUnauthorized, post(t, receiver(newKey).srv.URL, r.header, r.body).StatusCode, "under the new key only")
		})
	}
}

// A receiver given a store others may share names its sender.
func TestReceiverWithAStoreNamesItsSender(t *testing.T) {
	key := hmacKey(t, hmacSecret)
	for name, cfg := range map[string]outcome.ReceiverConfig{
		"no sender":        {Verifiers: []outcome.Verifier{key}, Nonces: outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{})},
		"sender too long":  {Verifiers: []outcome.Verifier{key}, Nonces: outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{}), Sender: strings.Repeat("s", outcome.MaxSenderBytes+1)},
		"invisible sender": {Verifiers: []outcome.Verifier{key}, Nonces: outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{}), Sender: "shop\n"},
	} {
		_, err := outcome.NewReceiver(cfg)
		assert.ErrorIs(t, err, store.ErrInvalid, name)
	}
	_, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
	assert.NoError(t, err, "a receiver's own store needs no sender")
}

// Rows a receiver wrote before replay keys named their sender (the first
// layout, gen.ReceiverNonceKey) are honoured until they expire, for any
// sender, and swept once expired.
func TestPartitionNonceStoreHonoursRowsOfTheFirstLayout(t *testing.T) {
	e := newEnv(t, time.UnixMilli(1_700_000_000_000))
	n := partitionNonces(t, e.s, e.p, func(c *outcome.PartitionNonceStoreConfig) {
		c.SweepEvery = -1
		c.MaxReplicaSkew = time.Second
	})
	now := e.clock.Now()
	until := now.Add(time.Minute)
	legacy := func(key string) (store.Key, store.Key) {
		row, err := gen.AppendReceiverNonceKey(nil, key)
		require.NoError(t, err)
		idx, err := gen.AppendReceiverNonceExpiryKey(nil, uint64(until.UnixMilli()), key)
		require.NoError(t, err)
		return row, idx
	}
	value, err := gen.EncodeReceiverNonceV1(gen.ReceiverNonceV1{UntilMs: uint64(until.UnixMilli()), Token: 7})
	require.NoError(t, err)
	row, idx := legacy("webhook-id:msg_old")
	_, err = e.s.Apply(ctx, e.p, store.NewBatch().Put(row, value).Put(idx, value))
	require.NoError(t, err)

	key := []outcome.NonceKey{{Key: "webhook-id:msg_old", Until: until.Add(time.Minute)}}
	_, err = n.Claim(ctx, "any", key, now)
	assert.ErrorIs(t, err, outcome.ErrReplayed, "an unexpired row of the first layout refuses its key")
	_, err = n.Claim(ctx, "any", []outcome.NonceKey{{Key: "webhook-id:msg_new", Until: until.Add(time.Minute)}}, now)
	assert.NoError(t, err, "other keys are not")

	deleted, err := n.Sweep(ctx, until.Add(time.Second))
	require.NoError(t, err)
	assert.Zero(t, deleted, "kept while a replica's window may still admit it")
	_, err = n.Claim(ctx, "any", key, until.Add(time.Millisecond))
	assert.NoError(t, err, "taken over once expired")
	got, _, err := e.s.Get(ctx, e.p, row)
	require.NoError(t, err)
	assert.Nil(t, got, "the expired row of the first layout went with the takeover")

	row, idx = legacy("nonce:0123456789abcdef")
	_, err = e.s.Apply(ctx, e.p, store.NewBatch().Put(row, value).Put(idx, value))
	require.NoError(t, err)
	deleted, err = n.Sweep(ctx, until.Add(time.Second+time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, 1, deleted, "an expired row of the first layout is swept")
	for _, k := range []store.Key{row, idx} {
		got, _, err := e.s.Get(ctx, e.p, k)
		require.NoError(t, err)
		assert.Nil(t, got)
	}
}

// A body that stalls holds the receiver for BodyTimeout at most: the
// request is answered 408 and its connection closed, without a call of
// the handler; a body that arrives within the bound is taken, and the
// handler then runs as long as it needs, its context intact.
func TestReceiverBoundsTheTimeItReadsABody(t *testing.T) {
	const bound = 200 * time.Millisecond
	key := hmacKey(t, hmacSecret)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, BodyTimeout: bound})
	require.NoError(t, err)
	var calls atomic.Int32
	srv := httptest.NewServer(recv.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		time.Sleep(2 * bound) // longer than the body's bound
		if r.Context().Err() != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, key)
	send := func(id string) request {
		n := len(rec.requests())
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, id)))
		return rec.requests()[n]
	}
	head := func(r request) string {
		var b strings.Builder
		fmt.Fprintf(&b, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", srv.Listener.Addr(), len(r.body))
		for name, vs := range r.header {
			for _, v := range vs {
				fmt.Fprintf(&b, "%s: %s\r\n", name, v)
			}
		}
		return b.String() + "\r\n"
	}
	const generous = 10 * time.Second

	t.Run("stalled", func(t *testing.T) {
		r := send("stalled")
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(generous)))
		_, err = io.WriteString(conn, head(r))
		require.NoError(t, err)
		_, err = conn.Write(r.body[:len(r.body)/2]) // and nothing more
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "answered within the bound, not when the client gives up")
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		assert.True(t, resp.Close, "the connection is not kept for another request")
		_, _ = io.Copy(io.Discard, resp.Body)
		_, err = conn.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF, "the server closed the connection")
		assert.Zero(t, calls.Load(), "the handler was not called")
	})

	t.Run("slow within the bound", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(generous)))
		br := bufio.NewReader(conn)
		for _, id := range []string{"slow-1", "slow-2"} { // two requests on one connection
			r := send(id)
			_, err = io.WriteString(conn, head(r))
			require.NoError(t, err)
			_, err = conn.Write(r.body[:len(r.body)/2])
			require.NoError(t, err)
			time.Sleep(bound / 4)
			_, err = conn.Write(r.body[len(r.body)/2:])
			require.NoError(t, err)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s: taken, and its handler's context outlived the body's bound", id)
		}
		assert.Equal(t, int32(2), calls.Load())
	})
}
