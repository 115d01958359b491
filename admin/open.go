package admin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// options are the flags of every subcommand; each reads those it
// declared.
type options struct {
	db, clusterFile, root string
	json                  bool

	partition, key, target string // as given
	partID, keyBytes       []byte // parsed
	targetID               []byte
	rootBytes              []byte

	kind, ref      string
	state          string // timers -state
	full           bool   // print values whole
	reason, who    string
	expect         string
	yes, due       bool
	namespace      string // formats raise
	to             uint   // formats raise
	force          bool   // formats raise
	dead           bool   // timers -dead, redrive -dead
	deadDue        string // -due of a dead letter's repair
	limit, maxRows int
	class          string
	after          string
	afterBytes     []byte
	arg            string // the argument after the flags (subcommand.arg)
	again          bool   // migrate -again
}

// check validates the flags before anything is opened, so that bad input
// costs no I/O.
func (o *options) check(sub *subcommand) error {
	switch {
	case o.db == "" && o.clusterFile == "":
		return usagef("%s: name the store: -db FILE (bbolt) or -cluster-file FILE (FoundationDB)", sub.name)
	case o.db != "" && o.clusterFile != "":
		return usagef("%s: -db and -cluster-file both given: name one store", sub.name)
	}
	var err error
	parse := func(flagName, text string, dst *[]byte) {
		if err != nil || text == "" {
			return
		}
		b, perr := parseTupleText(text)
		if perr != nil {
			err = usagef("%s: -%s does not parse: %v", sub.name, flagName, perr)
			return
		}
		*dst = b
	}
	parse("partition", o.partition, &o.partID)
	parse("key", o.key, &o.keyBytes)
	parse("target", o.target, &o.targetID)
	parse("root", o.root, &o.rootBytes)
	parse("after", o.after, &o.afterBytes)
	if err != nil {
		return err
	}
	if o.partID != nil {
		if _, perr := store.ParseIdentity(o.partID); perr != nil || o.partID[0] == 0xFF {
			return usagef("%s: -partition %s is no partition identity (a tuple)", sub.name, o.partition)
		}
	}
	if o.limit < 0 || o.maxRows < 0 {
		return usagef("%s: -limit and -max-rows take a positive number", sub.name)
	}
	return nil
}

// opened is an open store.
type opened struct {
	layer *fdblayer.Layer
	where string // the file or cluster file, for messages
}

func (st *opened) close() { _ = st.layer.Close() }

// partition returns the partition the -partition flag names.
func (st *opened) partition(o *options) store.Identity {
	id, _ := store.ParseIdentity(o.partID) // checked by options.check
	return id
}

// fdbInstall is how to install the operator's command that opens
// FoundationDB clusters (the FoundationDB engine module's cmd/mkitfdb) from
// a clone of the repository, while the module is not on the module proxy.
const fdbInstall = "go -C fdblayer/fdbengine install ./cmd/mkitfdb (in a clone of mkitfdb)"

// open opens the store the flags name: a bbolt file read-only for a view
// (a shared lock) and for writing for a repair, or a FoundationDB cluster
// through Config.OpenCluster. Nothing is created: a missing file is bad
// input.
func (c *Command) open(o *options, write bool) (*opened, error) {
	var e kv.Engine
	where := o.db
	if o.db != "" {
		be, err := boltengine.Open(o.db, boltengine.Config{
			ReadOnly: !write, MustExist: true, LockTimeout: boltengine.NoLockWait,
		})
		switch {
		case errors.Is(err, boltengine.ErrLocked):
			mode := "read it"
			if write {
				mode = "write it"
			}
			return nil, usagef("cannot %s: %v: bbolt lets one process open a file for writing, and no other open it meanwhile; stop that process (the service), or run this where the service is stopped", mode, err)
		case errors.Is(err, store.ErrCorrupt):
			return nil, usagef("%s is not a database of this library: %v", o.db, err)
		case err != nil:
			return nil, usagef("cannot open %s: %v", o.db, err)
		}
		e = be
	} else {
		where = o.clusterFile
		if _, err := os.Stat(o.clusterFile); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usagef("cluster file %s does not exist", o.clusterFile)
			}
			return nil, usagef("cluster file %s: %v", o.clusterFile, err)
		}
		if c.cfg.OpenCluster == nil {
			return nil, usagef("this %s opens no FoundationDB cluster: %s builds the mkitfdb that does (cgo and libfdb_c needed); a service's own command sets admin.Config.OpenCluster", c.name(), fdbInstall)
		}
		fe, err := c.cfg.OpenCluster(o.clusterFile)
		if err != nil {
			return nil, usagef("cannot open the cluster of %s: %v", o.clusterFile, err)
		}
		e = fe
	}
	// A nil -root is the Layer's default root. The gate checks the
	// store's formats (a store newer than this binary is refused) and
	// registers no process: the command runs for moments, and what its
	// repairs write every binary of the formats it checked reads.
	l, err := fdblayer.Open(e, fdblayer.Config{RootPrefix: o.rootBytes, Logger: slog.New(slog.DiscardHandler),
		Gate: evolve.GateConfig{ReadOnly: true, Clock: c.cfg.Clock}})
	if err != nil {
		_ = e.Close()
		return nil, usagef("cannot open %s: %v", where, err)
	}
	if o.clusterFile != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Probe(ctx); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("the cluster of %s does not answer: %w", o.clusterFile, err)
		}
	}
	return &opened{layer: l, where: where}, nil
}
