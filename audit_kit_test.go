package carmy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/audittest"
)

// TestJSONLinesAuditorKit runs the audittest kit on the JSON lines sink
// that Builder.AuditFile writes, over a file.
func TestJSONLinesAuditorKit(t *testing.T) {
	audittest.TestAuditor(t, func(t *testing.T) audittest.Sink {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return audittest.Sink{
			Auditor: carmy.NewJSONLinesAuditor(f),
			Records: func() ([]carmy.AuditRecord, error) {
				data, err := os.ReadFile(path)
				if err != nil {
					return nil, err
				}
				var out []carmy.AuditRecord
				sc := bufio.NewScanner(bytes.NewReader(data))
				for sc.Scan() {
					var rec carmy.AuditRecord
					if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
						return nil, err
					}
					out = append(out, rec)
				}
				return out, sc.Err()
			},
		}
	})
}
