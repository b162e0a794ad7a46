package matrix

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// tickMicros is the length of a clock tick of /proc/<pid>/stat, in µs:
// USER_HZ is 100 on every Linux architecture Go supports.
const tickMicros = 10_000

// cpuTicks is the user and system CPU time a process has used, in clock
// ticks (/proc/<pid>/stat, fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	if pid <= 0 {
		return 0, errors.New("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted from after its closing parenthesis (field 3, the state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, errors.Join(err1, err2)
}

// rssKB is a process's resident memory in KiB (VmRSS of /proc/<pid>/status).
func rssKB(pid int) (int64, error) {
	if pid <= 0 {
		return 0, errors.New("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}
