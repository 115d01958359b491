// Package readme holds the tests that keep the repository's README.md
// true: every shell command in it is run by a test here or by CI (and the
// test fails when one is added that nothing runs), its quick start is
// built as a module of its own and must print what the README says, and
// the limits it states are the ones Capabilities reports.
//
// Running the commands (the demo, the quick start, every benchmark
// command for one iteration, make fuzz) takes minutes, so plain go test
// only checks that each command is covered; with MKITFDB_README_COMMANDS=1
// the tests run them. make test-readme sets it, with a time limit of its
// own, and make test runs make test-readme after the race tests.
package readme
