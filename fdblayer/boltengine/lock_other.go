//go:build !linux

package boltengine

// lockHolder reports false: only Linux's /proc/locks names a lock's holder
// without the holder's cooperation, so elsewhere the error says "pid unknown".
func lockHolder(string) (int, bool) { return 0, false }
