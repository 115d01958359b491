package relay

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// The running sums must decide exactly what building the batches and
// validating them decides. These tests build the batches the reference's
// way (clone, extend, validate, once per row) on random rows and limits
// and compare.

func randomCaps(r *rand.Rand) store.Capabilities {
	return store.Capabilities{
		MaxBatchOps:      4 + r.IntN(120),
		ReservedBatchOps: r.IntN(3),
		MaxKeyBytes:      8 + r.IntN(40),
		MaxValueBytes:    8 + r.IntN(60),
		MaxBatchBytes:    100 + r.IntN(2_000),
	}
}

func randomBytes(r *rand.Rand, max int) []byte {
	return bytes.Repeat([]byte{'x'}, r.IntN(max+1))
}

// randomKey is 1 to max bytes long, rarely empty (which no batch allows).
func randomKey(r *rand.Rand, max int) []byte {
	if r.IntN(100) == 0 {
		return []byte{}
	}
	return bytes.Repeat([]byte{'k'}, 1+r.IntN(max))
}

func randomRow(r *rand.Rand, seq uint64, keyMax, valueMax int) Row {
	rec := gen.RelayV1{Target: identityOf(refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("t")})}
	for range r.IntN(30) {
		rec.Puts = append(rec.Puts, gen.RelayPut{Key: randomKey(r, keyMax), Value: randomBytes(r, valueMax)})
	}
	for range r.IntN(4) {
		rec.Deletes = append(rec.Deletes, randomKey(r, keyMax))
	}
	return Row{Seq: seq, Record: rec}
}

// referenceFitting is the reference's fitting_prefix.
func referenceFitting(caps store.Capabilities, rh store.Key, observed store.Value, rows []Row) int {
	batch := store.NewBatch().Require(store.Guard(rh, observed))
	for end, row := range rows {
		candidate := batch.Clone()
		for _, p := range row.Record.Puts {
			candidate.Put(p.Key, p.Value)
		}
		for _, k := range row.Record.Deletes {
			candidate.Delete(k)
		}
		sized := candidate.Clone().Put(rh, encodeU64(row.Seq))
		if len(candidate.Writes) > MaxRelayWrites || sized.Validate(caps) != nil {
			return end
		}
		batch = candidate
	}
	return len(rows)
}

func TestFittingMatchesTheReferencesClonedBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	outcomes := map[string]int{}
	for i := range 5_000 {
		caps := randomCaps(r).Full()
		f := &fire{targetCaps: caps, rh: store.Key(bytes.Repeat([]byte{'h'}, 5+r.IntN(10)))}
		rows := make([]Row, 1+r.IntN(8))
		costs := make([]rowCost, len(rows))
		keyMax, valueMax := 1+r.IntN(50), r.IntN(70)
		for j := range rows {
			rows[j] = randomRow(r, uint64(j+1), keyMax, valueMax)
			costs[j] = f.costOf(&rows[j].Record, j)
		}
		var observed store.Value
		if r.IntN(2) == 0 {
			observed = randomBytes(r, 12)
		}
		want := referenceFitting(caps, f.rh, observed, rows)
		require.Equal(t, want, f.fitting(costs, len(f.rh)+len(observed)), "case %d caps %+v", i, caps)
		switch want {
		case 0:
			outcomes["none"]++
		case len(rows):
			outcomes["all"]++
		default:
			outcomes["some"]++
		}
	}
	// The cases must reach every outcome, or the comparison proves little.
	require.Greater(t, min(outcomes["none"], outcomes["all"], outcomes["some"]), 200, "%v", outcomes)
}

func TestCheckpointSizingMatchesValidate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fit := 0
	for i := range 5_000 {
		caps := randomCaps(r)
		ck := checkpointer{caps: caps, delFit: true}
		if r.IntN(2) == 0 {
			ck.observed = randomBytes(r, 70)
		}
		state := randomBytes(r, 70)
		ck.stateBytes = len(state)
		// Small rows make the operation cap bind, large ones the byte caps.
		keyMax, valueMax := 1+r.IntN(50), r.IntN(70)
		var dels []*queued
		for range r.IntN(35) {
			q := &queued{key: randomKey(r, keyMax), value: randomBytes(r, valueMax)}
			dels = append(dels, q)
		}
		// Push all but the last, then ask about the last.
		var extra *queued
		if len(dels) > 0 && r.IntN(3) > 0 {
			extra = dels[len(dels)-1]
			dels = dels[:len(dels)-1]
		}
		for _, q := range dels {
			ck.push(q)
		}
		b := store.NewBatch().Require(store.Guard(scanKey, ck.observed)).Put(scanKey, state)
		for _, q := range append(dels, extra) {
			if q != nil {
				b.Require(store.Equals(q.key, q.value)).Delete(q.key)
			}
		}
		want := b.Validate(caps) == nil
		require.Equal(t, want, ck.fits(len(state), extra), "case %d caps %+v", i, caps)
		if want {
			fit++
		}
	}
	require.Greater(t, min(fit, 5_000-fit), 500, "fits %d of 5000", fit)
}

// identityOf returns p's tuple identity, as a relay row names its target.
func identityOf(p store.Partition) []byte {
	b, err := p.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	return b
}
