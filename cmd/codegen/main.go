// Command codegen generates Go codecs from declarative schemas: key classes
// in FoundationDB's tuple encoding, strict versioned value records, their
// fuzz targets, round-trip tests and benchmarks.
//
// Usage:
//
//	go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema DIR -out DIR [-pkg NAME] [-check]
//
// The pipeline is load (parse the schema package with go/parser) -> check
// (every mistake reported as file:line) -> model -> emit (one emitter per
// concern, all on github.com/dave/jennifer) -> write. Files are written only
// after every one of them rendered, so a failed run leaves the output as it
// was. With -check nothing is written: the command exits 1 when the output
// directory differs from what the schema generates.
//
// Schema syntax: see package github.com/mkit-dev/mkitfdb/schema.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	schemaDir := flag.String("schema", ".", "directory of the schema package")
	outDir := flag.String("out", "", "directory to write the generated package into (required)")
	pkg := flag.String("pkg", "gen", "package name of the generated code")
	checkOnly := flag.Bool("check", false, "write nothing; exit 1 when -out differs from what the schema generates")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: codegen -schema DIR -out DIR [-pkg NAME] [-check]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *outDir == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	files, err := generate(*schemaDir, *pkg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *checkOnly {
		stale, err := diff(*outDir, files)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if len(stale) > 0 {
			for _, name := range stale {
				fmt.Fprintf(os.Stderr, "codegen: %s is not what %s generates; run go generate ./...\n", name, *schemaDir)
			}
			os.Exit(1)
		}
		return
	}
	if err := write(*outDir, files); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
