package shape

// PatternWords says in words what a pattern carmy writes into a schema
// matches, for a reader that does not decode regular expressions (a
// model); "" for a pattern carmy did not write (one a jsonschema tag
// gives).
func PatternWords(pattern string) string {
	switch pattern {
	case durationPattern:
		return durationDesc
	case zeroTimePattern:
		return "the zero time (0001-01-01T00:00:00Z)"
	case nilUUIDPattern:
		return "the nil UUID (00000000-0000-0000-0000-000000000000)"
	}
	return ""
}
