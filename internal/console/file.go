package console

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Header is the header in which the console's page, and `carmy
// approvals`, send the console secret: never a cookie, which browsers
// send to every port of a host.
const Header = "X-Carmy-Console"

// filePattern names the files that hold a console's link with its secret.
const filePattern = "carmy-console-*.url"

// Dir is the directory of the files that hold console links:
// $XDG_RUNTIME_DIR, the user's own, else the temporary directory.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// WriteFile writes a console's link, secret included, to a new file in
// [Dir] that only the user can read, and returns its path. The server
// removes it when it stops; `carmy approvals` finds it there meanwhile.
func WriteFile(link string) (string, error) {
	f, err := os.CreateTemp(Dir(), filePattern) // mode 0600
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintln(f, link)
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// Local is a console of a local server, as its file names it.
type Local struct {
	File   string // the file's path
	Base   string // the server's URL, such as http://127.0.0.1:41234
	Secret string // the console secret
}

// Find returns the consoles whose files are in [Dir]: regular files that
// this user owns and that no one else may read or write, holding a link
// to a loopback address. A file another user could have planted or read
// is skipped, and so is one that holds anything else; the errors say why.
func Find() ([]Local, []error) {
	paths, err := filepath.Glob(filepath.Join(Dir(), filePattern))
	if err != nil {
		return nil, []error{err}
	}
	var out []Local
	var errs []error
	for _, p := range paths {
		l, err := readLocal(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		out = append(out, l)
	}
	return out, errs
}

func readLocal(path string) (Local, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Local{}, err
	}
	if !fi.Mode().IsRegular() || !private(fi) {
		return Local{}, errors.New("skipped: not a regular file of this user that only this user may read")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Local{}, err
	}
	u, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil || u.Scheme != "http" || u.Path != "/console" || u.Query().Get("token") == "" {
		return Local{}, errors.New("skipped: does not hold a console link")
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return Local{}, errors.New("skipped: the console is not on a loopback address")
	}
	return Local{File: path, Base: "http://" + u.Host, Secret: u.Query().Get("token")}, nil
}
