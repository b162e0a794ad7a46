package shape

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

type encodeInner struct {
	F float64 `json:"f"`
}

type encodeCycle struct {
	Next *encodeCycle `json:"next"`
}

type encodeAll struct {
	Meta   encodeInner              `json:",inline"`
	IP     [4]byte                  `json:"ip"`
	D      time.Duration            `json:"d"`
	T      time.Time                `json:"t"`
	ID     uuid.UUID                `json:"id"`
	M      map[string]*int          `json:"m"`
	S      []string                 `json:"s"`
	B      []byte                   `json:"b"`
	Skip   int                      `json:"skip,omitempty"`
	Zero   time.Time                `json:"zero,omitzero"`
	Ptr    *string                  `json:"ptr,omitempty"`
	Nested map[string][]encodeInner `json:"nested,omitempty"`
}

func TestEncode(t *testing.T) {
	empty := ""
	one := 1
	tests := []struct {
		name string
		v    any
		want string // the JSON, or the start of the error
		fail bool
	}{
		{"every kind", encodeAll{
			Meta: encodeInner{F: 1.5}, IP: [4]byte{127, 0, 0, 1}, D: 90 * time.Minute,
			T: time.Date(2024, 2, 29, 1, 2, 3, 4, time.UTC), ID: uuid.MustParse("0190b3d2-4b7e-7c3a-9f00-1234567890ab"),
			M: map[string]*int{"b": nil, "a": &one}, B: []byte("hi"), Ptr: &empty,
		}, `{"f":1.5,"ip":[127,0,0,1],"d":"1h30m0s","t":"2024-02-29T01:02:03.000000004Z","id":"0190b3d2-4b7e-7c3a-9f00-1234567890ab","m":{"a":1,"b":null},"s":[],"b":"aGk=","ptr":""}`, false},
		{"NaN", encodeInner{F: math.NaN()}, "f is NaN", true},
		{"year 10000", encodeAll{T: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "t is in the year 10000", true},
		{"infinity deep", encodeAll{Nested: map[string][]encodeInner{"k": {{}, {F: math.Inf(1)}}}}, "nested.k[1].f is +Inf", true},
		{"invalid UTF-8", encodeAll{S: []string{"ok", "\xff"}}, "s[1] is not valid UTF-8", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Of(reflect.TypeOf(tt.v))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Encode(nil, n, reflect.ValueOf(tt.v))
			switch {
			case tt.fail && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("Encode = %s, %v; want an error starting %q", got, err, tt.want)
			case !tt.fail && (err != nil || string(got) != tt.want):
				t.Errorf("Encode = %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
	t.Run("cycle", func(t *testing.T) {
		c := &encodeCycle{}
		c.Next = c
		n, _ := Of(reflect.TypeOf(c))
		if _, err := Encode(nil, n, reflect.ValueOf(c)); err == nil || !strings.Contains(err.Error(), "pointer cycle") {
			t.Errorf("Encode of a cycle = %v; want a nesting error", err)
		}
	})
}
