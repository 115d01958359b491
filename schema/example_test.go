package schema_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// What cmd/codegen generates from this schema, in package gen: a key
// class's constructor appends a FoundationDB tuple, so keys sort by their
// fields; the parser gives the fields back, and the class's range holds
// every key of the class.
func Example_keys() {
	k9 := gen.AppendRelayKey(nil, 9)
	k10 := gen.AppendRelayKey(nil, 10)
	parsed, err := gen.ParseRelayKey(k10)
	if err != nil {
		panic(err)
	}
	start, end := gen.ClassRange(gen.TagRelayKey)
	fmt.Println("9 sorts before 10:", bytes.Compare(k9, k10) < 0)
	fmt.Println("parsed:", parsed.Seq)
	fmt.Println("in the class range:", bytes.Compare(start, k10) <= 0 && bytes.Compare(k10, end) < 0)
	// Output:
	// 9 sorts before 10: true
	// parsed: 10
	// in the class range: true
}

// A generated record encodes after checking the schema's rules and
// decodes strictly: bytes that are not a whole, valid record are an error
// wrapping wire.ErrCorrupt, never a panic or a half-filled value.
func Example_records() {
	// Any schema's partition can be a target: here the reference domain's.
	target, err := refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("shop"), Repo: refdomain.MustRepoName("orders"), ShardRef: refdomain.MustShardRef("main")}.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	row := gen.RelayV1{
		Target: target, // the target partition's tuple identity
		Puts:   []gen.RelayPut{{Key: []byte("latest"), Value: []byte("ada/1")}},
		AtMs:   1_700_000_000_000,
	}
	b, err := gen.EncodeRelayV1(row)
	if err != nil {
		panic(err)
	}
	back, err := gen.DecodeRelayV1(b)
	if err != nil {
		panic(err)
	}
	to, err := refdomain.ParsePartition(back.Target)
	if err != nil {
		panic(err)
	}
	fmt.Printf("to %s: %s=%s\n", to, back.Puts[0].Key, back.Puts[0].Value)

	_, err = gen.DecodeRelayV1(b[:len(b)-1])
	fmt.Println("truncated is corrupt:", errors.Is(err, wire.ErrCorrupt))
	// Output:
	// to ref_index(shop,orders,main): latest=ada/1
	// truncated is corrupt: true
}

// Generated identities are valid by construction: the constructor checks
// the name.
func Example_identities() {
	_, err := gen.NewOutcomeID("")
	fmt.Println("empty is invalid:", errors.Is(err, wire.ErrInvalid))
	id, err := gen.NewOutcomeID("r-42")
	fmt.Println(id, err)
	// Output:
	// empty is invalid: true
	// r-42 <nil>
}
