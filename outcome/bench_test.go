package outcome_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BenchmarkDeliveryFire measures one fire delivering 16 outcomes, per
// delivered outcome: against an in-process sink and against a Receiver
// over loopback HTTP (WebhookSink, HMAC-SHA256), each beside its baseline,
// the same 16 sink calls made directly, without the store. Commits per
// outcome are counted, not timed.
//
//	go test -run '^$' -bench DeliveryFire -count 6 ./outcome
func BenchmarkDeliveryFire(b *testing.B) {
	const rows = 16
	key := hmacKey(b, hmacSecret)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, MaxNonces: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(context.Context, outcome.Envelope) error { return nil })))
	defer srv.Close()
	sinks := []struct {
		name string
		sink outcome.Sink
	}{
		{"inprocess", outcome.SinkFunc(func(context.Context, outcome.Envelope) error { return nil })},
		{"webhook", webhook(b, srv.URL, key)},
	}
	ids := make([]string, rows)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
	}
	for _, s := range sinks {
		b.Run(s.name+"/fire", func(b *testing.B) {
			e := newEnv(b, t0)
			faults := storetest.NewFaults(e.s)
			reg, err := timers.NewRegistry(delivery(b, s.sink))
			if err != nil {
				b.Fatal(err)
			}
			commits := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				e.seed(ids...)
				before := faults.Calls(storetest.MethodApply)
				b.StartTimer()
				rep, err := timers.RunDue(ctx, faults, partition, reg, t0, timers.RunConfig{Clock: e.clock})
				if err != nil || rep.Fired != 1 {
					b.Fatalf("%+v %v", rep, err)
				}
				commits += faults.Calls(storetest.MethodApply) - before
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/outcome")
			b.ReportMetric(float64(commits)/float64(b.N*rows), "commits/outcome")
		})
		b.Run(s.name+"/baseline", func(b *testing.B) {
			o := sampleEnvelope(b, "r00")
			b.ReportAllocs()
			for range b.N {
				for range rows {
					if err := s.sink.Deliver(ctx, o); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/outcome")
		})
	}
}
