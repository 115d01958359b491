// Command codegen generates Go codecs from declarative schemas: key classes
// in FoundationDB's tuple encoding, strict versioned value records, the
// value families that read every version a key class's rows hold as the
// newest, their fuzz targets, round-trip tests and benchmarks.
//
// Usage:
//
//	go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema DIR -out DIR [-pkg NAME] [-check] [-unregistered]
//
// The pipeline is load (parse the schema package with go/parser) -> check
// (every mistake reported as file:line) -> model -> emit (one emitter per
// concern, all on github.com/dave/jennifer) -> write. Files are written only
// after every one of them rendered, so a failed run leaves the output as it
// was. With -check nothing is written: the command exits 1 when the output
// directory, or the layout lock, differs from what the schema generates.
// With -unregistered the package does not register itself in package
// registry (codec/registry), which allows one package per namespace: it is
// for a test that links the codecs of an older binary of a schema beside
// the schema's own package (see examples/orders/internal/ordersv1).
//
// The layout lock (layout.lock, beside the schema, committed with it)
// records every layout generated from the schema. Every run, -check too,
// compares the schema with it first and refuses, exiting 2 with a
// file:line error naming the rule, any change that would make bytes
// already stored read differently or fail; the first run writes it. The
// rules, retirement and drafts: see package schema, "Evolving a schema".
//
// Schema syntax: see package github.com/mkit-dev/mkitfdb/schema.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	schemaDir := flag.String("schema", ".", "directory of the schema package")
	outDir := flag.String("out", "", "directory to write the generated package into (required)")
	pkg := flag.String("pkg", "gen", "package name of the generated code")
	checkOnly := flag.Bool("check", false, "write nothing; exit 1 when -out or the schema's layout.lock differs from what the schema generates")
	unregistered := flag.Bool("unregistered", false, "generate no registration in package registry (no registry.go): for a test fixture linked beside the registered package of its namespace, such as an older binary's codecs")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: codegen -schema DIR -out DIR [-pkg NAME] [-check] [-unregistered]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *outDir == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	out, err := buildWith(*schemaDir, *pkg, *unregistered)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *checkOnly {
		stale, err := diff(*outDir, out.files)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fresh, err := lockFresh(*schemaDir, out.lock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if !fresh {
			stale = append(stale, filepath.Join(*schemaDir, lockName))
		}
		if len(stale) > 0 {
			for _, name := range stale {
				fmt.Fprintf(os.Stderr, "codegen: %s is not what %s generates; run go generate ./...\n", name, *schemaDir)
			}
			os.Exit(1)
		}
		return
	}
	if err := write(*outDir, out.files); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The lock last: it never holds a layout whose code was not written.
	if err := os.WriteFile(filepath.Join(*schemaDir, lockName), out.lock, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
