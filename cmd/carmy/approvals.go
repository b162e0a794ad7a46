package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/carmy-dev/carmy/internal/console"
	"github.com/carmy-dev/carmy/internal/httpapi"
)

const approvalsUsage = `usage: carmy approvals [flags]
       carmy approvals approve [-yes] ID
       carmy approvals deny ID

carmy approvals lets the person at a terminal decide the calls that wait
for their approval on the carmy servers they run on this machine: a server
over stdio that an agent client started, whose client cannot ask them, or
a local HTTP server without authentication. Each such server writes its
console's link, with the secret that approves calls, to a file only its
user can read ($XDG_RUNTIME_DIR, else the temporary directory, named
carmy-console-*.url) and removes it when it stops; carmy approvals reads
those files, of this user only. Before it lists or sends anything, it
checks that the server behind a file knows that file's secret (a
challenge the server answers without the secret going on the wire), and
skips a file whose server does not: another program may have taken the
port of a server that stopped.

Without arguments it lists the pending approvals: each one's id, tool,
caller and expiry, and the input exactly as it will run. "approve ID"
shows the call first, then asks you to confirm on the terminal (-yes
approves without asking, for scripts); "deny ID" denies it. Once approved,
a task that waits for the approval resumes at once; any other call runs
when the agent makes it again, with the same input. A denial is final: the
call stays refused until the approval expires.

Flags:
`

// approvalsIn is where "approve" reads the person's answer, and
// inTerminal reports whether it is a terminal, where a person types it.
var (
	approvalsIn io.Reader = os.Stdin
	inTerminal            = func() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
)

func runApprovals(args []string, stdout, stderr io.Writer) int {
	fs, help := newFlagSet("carmy approvals", approvalsUsage, stdout, stderr, args)
	asJSON := fs.Bool("json", false, "list the pending approvals as JSON, one array")
	yes := fs.Bool("yes", false, "approve without asking on the terminal (for scripts)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on a server that does not answer within this `duration`")
	if help {
		fs.Usage()
		return 0
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case len(pos) == 0:
		return listApprovals(ctx, *asJSON, stdout, stderr)
	case len(pos) == 2 && (pos[0] == "approve" || pos[0] == "deny"):
		return decideApproval(ctx, pos[0], pos[1], *yes, stdout, stderr)
	}
	fmt.Fprintf(stderr, "carmy approvals: want no argument, \"approve ID\" or \"deny ID\"; got %q\n", strings.Join(pos, " "))
	fs.Usage()
	return 2
}

// pending is a call that waits for approval on a local server: the
// approval as the server's approvals API shows it, read through the one
// type the server writes, and the server's URL, which the API does not
// say.
type pending struct {
	httpapi.Approval
	Server string
}

// listed is a pending approval as carmy approvals -json prints it: the
// command's own document, a few of the approval's members and the server.
type listed struct {
	ID        string    `json:"id"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"`
	Status    string    `json:"status"`
	Expires   time.Time `json:"expires"`
	Approver  string    `json:"approver,omitempty"`
	Text      string    `json:"text"`
	TaskWaits bool      `json:"task_waits,omitempty"`
	Server    string    `json:"server"`
}

func (p pending) listed() listed {
	return listed{p.ID, p.Tool, p.Principal, p.Status, p.Expires, p.Approver, p.Text, p.TaskWaits, p.Server}
}

// localServer is a server found through its console file, with its
// pending approvals.
type localServer struct {
	console.Local
	pending []httpapi.Approval
}

// send asks a server's approvals API, with its console secret, for path
// and decodes the answer into v; it returns the answer's status.
func (s localServer) send(ctx context.Context, method, path string, v any) (int, error) {
	var payload io.Reader
	if method == http.MethodPost {
		payload = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, payload)
	if err != nil {
		return 0, err
	}
	req.Header.Set(console.Header, s.Secret)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "carmy-cli")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode != http.StatusOK {
		var e httpapi.Failure
		if json.Unmarshal(body, &e) == nil && e.Error != nil {
			return res.StatusCode, fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return res.StatusCode, fmt.Errorf("the server answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
	}
	return res.StatusCode, json.Unmarshal(body, v)
}

// proves asks the server behind s's file to prove that it knows the
// file's secret: it sends a random nonce, never the secret, and checks the
// answer, an HMAC of the nonce keyed by the secret.
func (s localServer) proves(ctx context.Context) error {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	nonce := hex.EncodeToString(b[:])
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Base+console.ChallengePath, strings.NewReader(`{"nonce":"`+nonce+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "carmy-cli")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var answer struct {
		Proof string `json:"proof"`
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || !console.Proves(s.Secret, nonce, answer.Proof) {
		return errNotTheServer
	}
	return nil
}

// errNotTheServer is a server that failed the challenge of its file.
var errNotTheServer = errors.New("the server there does not know this file's secret: the server that wrote the file stopped, and another program took its port (or runs a carmy too old to prove it); nothing was sent to it")

// servers returns the local servers that answer, and prove they wrote
// their files; those that do not (a file a killed server left behind, a
// program that took its port) are reported on stderr.
func servers(ctx context.Context, stderr io.Writer) []localServer {
	found, errs := console.Find()
	for _, err := range errs {
		fmt.Fprintf(stderr, "carmy approvals: %v\n", err)
	}
	var out []localServer
	for _, l := range found {
		s := localServer{Local: l}
		err := s.proves(ctx)
		if errors.Is(err, syscall.ECONNREFUSED) {
			// Nothing listens there: the server stopped without removing
			// its file (it was killed), and its secret died with it.
			if os.Remove(l.File) == nil {
				fmt.Fprintf(stderr, "carmy approvals: removed %s, left by a server that no longer runs (%s)\n", l.File, l.Base)
			}
			continue
		}
		var list []httpapi.ApprovalSummary
		if err == nil {
			_, err = s.send(ctx, http.MethodGet, "/approvals?status=pending", &list)
		}
		if err != nil {
			fmt.Fprintf(stderr, "carmy approvals: skipped %s (from %s): %v\n", l.Base, l.File, err)
			continue
		}
		// The list summarizes; each approval's input comes with the
		// approval itself, and a person decides only on what they read.
		for _, a := range list {
			full := httpapi.Approval{ApprovalSummary: a}
			if _, err := s.send(ctx, http.MethodGet, "/approvals/"+url.PathEscape(a.ID), &full); err != nil {
				fmt.Fprintf(stderr, "carmy approvals: %s: approval %s: %v\n", l.Base, a.ID, err)
				full = httpapi.Approval{ApprovalSummary: a}
			}
			s.pending = append(s.pending, full)
		}
		out = append(out, s)
	}
	return out
}

// pendingOf lists the pending approvals of the servers, each once (a
// server that listens on HTTP and serves stdio too has two consoles),
// newest first.
func pendingOf(srvs []localServer) []pending {
	var all []pending
	seen := map[string]bool{}
	for _, s := range srvs {
		for _, a := range s.pending {
			if !seen[a.ID] {
				seen[a.ID] = true
				all = append(all, pending{a, s.Base})
			}
		}
	}
	return all
}

func listApprovals(ctx context.Context, asJSON bool, stdout, stderr io.Writer) int {
	srvs := servers(ctx, stderr)
	all := pendingOf(srvs)
	if asJSON {
		out := make([]listed, len(all))
		for i, a := range all {
			out[i] = a.listed()
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		stdout.Write(withNewline(b))
		return 0
	}
	if len(srvs) == 0 {
		fmt.Fprintf(stdout, "No carmy server of this user runs on this machine with a console (looked for %s).\n", consoleFiles())
		return 0
	}
	if len(all) == 0 {
		fmt.Fprintf(stdout, "No call waits for approval on the %d local carmy server(s).\n", len(srvs))
		return 0
	}
	for i, a := range all {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printApproval(stdout, a)
	}
	fmt.Fprintln(stdout, "\nDecide with: carmy approvals approve ID, or carmy approvals deny ID")
	return 0
}

// printApproval writes one approval: what runs, who asks, until when.
func printApproval(w io.Writer, a pending) {
	who := a.Principal
	if who == "" {
		who = "anonymous"
	}
	fmt.Fprintf(w, "%s  %s\n", a.ID, a.Tool)
	fmt.Fprintf(w, "  requested by %s, on %s; expires %s\n", who, a.Server, a.Expires.Local().Format(time.DateTime))
	fmt.Fprintln(w, "  input (exactly what will run):")
	for line := range strings.SplitSeq(a.Text, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

// decideApproval decides approval id on the local server that has it.
// Approving shows the call first, exactly as it will run, and asks the
// person at the terminal, unless yes: an agent that tells its user "run
// carmy approvals approve ID" does not get a blind approval.
func decideApproval(ctx context.Context, decision, id string, yes bool, stdout, stderr io.Writer) int {
	srvs := servers(ctx, stderr)
	var a pending
	i := slices.IndexFunc(srvs, func(s localServer) bool {
		_, err := s.send(ctx, http.MethodGet, "/approvals/"+url.PathEscape(id), &a.Approval)
		return err == nil
	})
	if i < 0 {
		fmt.Fprintf(stderr, "carmy approvals: no local carmy server has approval %q; run \"carmy approvals\" to list the pending ones\n", id)
		return 1
	}
	a.Server = srvs[i].Base
	waits := a.TaskWaits
	if decision == "approve" {
		printApproval(stdout, a)
		if waits {
			fmt.Fprintf(stdout, "Approving runs %s once with this input: the task that waits for it resumes at once.\n", a.Tool)
		} else {
			fmt.Fprintf(stdout, "Approving lets %s run once with this input, when the agent makes the call again.\n", a.Tool)
		}
		if !yes && !confirmed(stdout, stderr) {
			return 1
		}
	}
	if _, err := srvs[i].send(ctx, http.MethodPost, "/approvals/"+url.PathEscape(id)+"/"+decision, &a.Approval); err != nil {
		fmt.Fprintf(stderr, "carmy approvals: %s %s: %v\n", decision, id, err)
		return 1
	}
	a.Server = srvs[i].Base
	switch {
	case a.Status == "approved" && waits:
		fmt.Fprintln(stdout, "Approved: the waiting task resumes now and runs this call once.")
	case a.Status == "approved":
		fmt.Fprintln(stdout, "Approved: the call runs when the agent makes it again, with this input, before it expires.")
	default:
		printApproval(stdout, a)
		fmt.Fprintln(stdout, "Denied: the call stays refused until it expires.")
	}
	return 0
}

// confirmed asks the person at the terminal to confirm an approval, and
// reports whether they did; without a terminal it refuses, saying how a
// script approves.
func confirmed(stdout, stderr io.Writer) bool {
	if !inTerminal() {
		fmt.Fprintln(stderr, "carmy approvals: approve asks you to confirm on a terminal, and standard input is not one: run it in a terminal, or pass -yes to approve without asking (in a script)")
		return false
	}
	fmt.Fprint(stdout, "Approve this call? [y/N] ")
	line, _ := bufio.NewReader(approvalsIn).ReadString('\n')
	if answer := strings.ToLower(strings.TrimSpace(line)); answer == "y" || answer == "yes" {
		return true
	}
	fmt.Fprintln(stdout, "Not approved: nothing was decided.")
	return false
}

// consoleFiles names where the console files are looked for.
func consoleFiles() string {
	return console.Dir() + string(os.PathSeparator) + "carmy-console-*.url"
}
