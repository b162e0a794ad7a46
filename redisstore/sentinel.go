package redisstore

import (
	"strings"

	"github.com/carmy-dev/carmy/store"
)

func init() {
	store.Register("redis-sentinel", open)
	store.Register("rediss-sentinel", open)
}

// splitSentinels returns a redis-sentinel:// or rediss-sentinel:// URL
// with the first of its comma-separated Sentinel addresses, and the
// others; any other URL as it is.
//
//	redis-sentinel://user:pass@s1:26379,s2:26379,s3:26379/0?master=mymaster
func splitSentinels(raw string) (string, []string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.HasSuffix(scheme, "-sentinel") {
		return raw, nil
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@') + 1 // the user info's end, 0 without one
	hosts := strings.Split(rest[at:end], ",")
	return scheme + "://" + rest[:at] + hosts[0] + rest[end:], hosts[1:]
}
