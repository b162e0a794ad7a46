package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// RateLimits is the [rate_limits] table: a default rate for every tool
// and rates of named tools, each with the site of its key.
type RateLimits struct {
	Default *Rate           // nil when the table has no default
	Tools   map[string]Rate // by tool name; nil when the table is absent
}

// Rate is one entry of [rate_limits]: Calls calls per Per, or no limit
// when Calls is 0 ("unlimited").
type Rate struct {
	Calls int
	Per   time.Duration
	Key   string // "rate_limits.create_order"
	Site  string // "carmy.toml:7"
}

// rateUnits are the periods a rate may name by word.
var rateUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// rateExample is what a rate looks like, for messages.
const rateExample = `"10/min" (calls per second, min, hour or day, or per a duration such as "10/30s"), or "unlimited"`

// parseRate reads a rate: "10/min", "100/h", "5/30s", or "unlimited".
func parseRate(s string) (calls int, per time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "unlimited" {
		return 0, 0, nil
	}
	n, unit, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not a rate such as %s", s, rateExample)
	}
	calls, err = strconv.Atoi(strings.TrimSpace(n))
	if err != nil || calls <= 0 {
		return 0, 0, fmt.Errorf("%q: the number of calls must be a positive integer, as in %s", s, rateExample)
	}
	unit = strings.TrimSpace(unit)
	if per, ok = rateUnits[unit]; !ok {
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return 0, 0, fmt.Errorf("%q: the period must be second, min, hour, day or a positive duration, as in %s", s, rateExample)
		}
	}
	return calls, per, nil
}

// parseRateLimits checks the [rate_limits] table: "default" and tool
// names, each a rate. Whether a tool of that name exists is the builder's
// to say, at Build.
func parseRateLimits(d *document, path string, fail func(line int, format string, args ...any)) RateLimits {
	v := d.value("rate_limits")
	if v == nil {
		return RateLimits{}
	}
	line := d.line("rate_limits")
	m, isTable := v.(map[string]any)
	if !isTable {
		fail(line, "rate_limits must be a table such as [rate_limits] with default = \"100/min\", not %s", tomlValue(v))
		return RateLimits{}
	}
	var keys map[string]toml.Primitive
	_ = d.md.PrimitiveDecode(d.raw["rate_limits"], &keys) // a table, as checked above
	out := RateLimits{Tools: map[string]Rate{}}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := line
		if l := lineOf(d.md, keys[k]); l > 0 {
			at = l
		}
		s, isString := m[k].(string)
		if !isString {
			fail(at, "rate_limits.%s must be a rate such as %s, not %s", k, rateExample, tomlValue(m[k]))
			continue
		}
		calls, per, err := parseRate(s)
		if err != nil {
			fail(at, "rate_limits.%s: %v", k, err)
			continue
		}
		r := Rate{Calls: calls, Per: per, Key: "rate_limits." + k, Site: fmt.Sprintf("%s:%d", path, at)}
		if k == "default" {
			out.Default = &r
		} else {
			out.Tools[k] = r
		}
	}
	return out
}
