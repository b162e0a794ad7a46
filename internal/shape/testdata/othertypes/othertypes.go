// Package othertypes holds types for carmy's schema tests whose names clash
// with types of the test corpus, so that the golden schemas show $defs names
// staying unique across packages. Only tests import it.
package othertypes

// Tree shares its name with the corpus's Tree and, like it, recurses.
type Tree struct {
	Label    string `json:"label" validate:"required"`
	Children []Tree `json:"children,omitempty"`
}

// Item shares its name with the corpus's Item; it does not recurse, so it
// stays inline.
type Item struct {
	Code string `json:"code" validate:"len=4"`
}
