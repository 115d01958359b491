package outcome_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// captureTransport keeps the requests a sink sends and answers 204,
// so that signed requests are made without a network.
type captureTransport struct{ reqs []request }

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	c.reqs = append(c.reqs, request{header: r.Header.Clone(), body: body.Bytes()})
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// BenchmarkReceiverVerify measures Receiver.Verify of fresh signed
// requests (HMAC-SHA256, the library's scheme) with a PartitionNonceStore
// beside the MemoryNonceStore baseline, alternating blocks of 64 requests
// so that machine noise slows both alike. It reports each side's time per
// request, their ratio, and the partition store's commits and reads per
// request (counted, exact: one commit per claim, and a scan and a commit
// per sweep every DefaultSweepEvery claims, the commit only when rows
// expired). The mvcc-latency case adds a round trip to every transaction
// start, read and commit (MVCC engine, injected latency).
//
//	go test -run '^$' -bench ReceiverVerify -count 6 ./outcome
func BenchmarkReceiverVerify(b *testing.B) {
	for _, c := range []struct {
		name string
		eng  func() kv.Engine
	}{
		{"memory-engine", func() kv.Engine { return memengine.New() }},
		{"mvcc-latency", func() kv.Engine {
			// As bench/README.md's worker benchmarks: sleeps of up to 200 µs
			// that stretch to about a millisecond on the 2-core machine.
			return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Latency: 200 * time.Microsecond})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
			l, err := fdblayer.Open(c.eng(), fdblayer.Config{Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			faults := storetest.NewFaults(l)
			key := hmacKey(b, hmacSecret)
			mem, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Clock: clk, MaxNonces: 1 << 22})
			if err != nil {
				b.Fatal(err)
			}
			nonces, err := outcome.NewPartitionNonceStore(outcome.PartitionNonceStoreConfig{Store: faults, Partition: partition})
			if err != nil {
				b.Fatal(err)
			}
			part, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Clock: clk, Nonces: nonces, Sender: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			ct := &captureTransport{}
			sink := webhook(b, "https://hooks.example.test/outcomes", key, func(wc *outcome.WebhookSinkConfig) {
				wc.Client = &http.Client{Transport: ct}
				wc.Clock = clk
			})
			env := sampleEnvelope(b, "bench")
			const block = 64
			sign := func() {
				ct.reqs = ct.reqs[:0]
				for range block {
					if err := sink.Deliver(ctx, env); err != nil {
						b.Fatal(err)
					}
				}
			}
			verify := func(r *outcome.Receiver) time.Duration {
				start := time.Now()
				for _, q := range ct.reqs {
					req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(q.body))
					req.Header = q.header
					if _, err := r.Verify(req); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			var memT, partT time.Duration
			n := 0
			commits0, reads0 := faults.Calls(storetest.MethodApply), faults.Calls(storetest.MethodGet)+faults.Calls(storetest.MethodScan)
			b.ResetTimer()
			for n < b.N {
				b.StopTimer()
				sign()
				b.StartTimer()
				memT += verify(mem)
				partT += verify(part)
				n += block
				clk.Advance(time.Minute) // windows (6 min with the skew) end: the sweeps have rows to delete
			}
			b.ReportMetric(float64(memT.Nanoseconds())/float64(n), "memory-ns/req")
			b.ReportMetric(float64(partT.Nanoseconds())/float64(n), "partition-ns/req")
			b.ReportMetric(float64(partT)/float64(memT), "partition/memory")
			b.ReportMetric(float64(faults.Calls(storetest.MethodApply)-commits0)/float64(n), "commits/req")
			reads := faults.Calls(storetest.MethodGet) + faults.Calls(storetest.MethodScan) - reads0
			b.ReportMetric(float64(reads)/float64(n), "reads/req")
		})
	}
}
