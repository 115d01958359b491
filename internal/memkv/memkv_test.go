package memkv

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestLessItemIsKeyOrder: the items' inline copies of the first 32 key
// bytes order them exactly as their keys, for keys of every length around
// 8, 16, 24 and 32 and runs of zero bytes where the zero padding could
// mislead.
func TestLessItemIsKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 0x7f, 0xff}
	var keys [][]byte
	for range 3000 {
		k := make([]byte, rng.IntN(40))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, k)
	}
	keys = append(keys, []byte{}, []byte{0}, make([]byte, 16), make([]byte, 17), append(make([]byte, 16), 1),
		make([]byte, 32), make([]byte, 33), append(make([]byte, 32), 1), append(make([]byte, 31), 1))
	items := make([]Item, len(keys))
	for i, k := range keys {
		items[i] = KeyItem(k)
	}
	for i := range items {
		for j := range items {
			want := bytes.Compare(keys[i], keys[j]) < 0
			if got := Less(items[i], items[j]); got != want {
				t.Fatalf("Less(%x, %x) = %v, want %v", keys[i], keys[j], got, want)
			}
		}
	}
}
