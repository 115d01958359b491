//go:build !linux

package admin

// isTerminal reports false where the command cannot tell a terminal: a
// repair then needs -yes.
func isTerminal(any) bool { return false }
