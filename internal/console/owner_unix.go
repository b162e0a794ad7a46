//go:build unix

package console

import (
	"io/fs"
	"os"
	"syscall"
)

// private reports whether this process's user owns the file and no one
// else may read or write it.
func private(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid() && fi.Mode().Perm()&0o077 == 0
}
