package boltengine

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockHolder returns the pid of a process holding a flock on the file at
// path, as /proc/locks lists it (the kernel's table of file locks: "1:
// FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF"). It reports
// false when the file, the table or a matching entry cannot be read; a pid
// from another pid namespace is reported as the table shows it.
func lockHolder(path string) (int, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, false
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	dev := uint64(st.Dev) // uint32 on some architectures
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// A waiter's line has "->" after the number; holders' lines do not.
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid, true
		}
	}
	return 0, false
}
