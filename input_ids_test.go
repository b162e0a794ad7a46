package carmy

import (
	"testing"

	"github.com/google/uuid"
)

func TestExecutionIDs(t *testing.T) {
	t.Parallel()
	prev := ""
	for range 20000 {
		s, err := newExecutionID()
		if err != nil {
			t.Fatal(err)
		}
		id, err := uuid.Parse(s)
		if err != nil || id.Version() != 7 || id.Variant() != uuid.RFC4122 || id.String() != s {
			t.Fatalf("%s: version %d, variant %v, %v", s, id.Version(), id.Variant(), err)
		}
		if s <= prev { // the text of a v7 id sorts by time
			t.Fatalf("%s does not follow %s", s, prev)
		}
		prev = s
	}
}
