// Package readme holds the tests that keep the repository's README.md
// true: every shell command in it is run by a test here or by CI (and the
// test fails when one is added that nothing runs), its quick start is
// built as a module of its own and must print what the README says, and
// the limits it states are the ones Capabilities reports.
package readme
