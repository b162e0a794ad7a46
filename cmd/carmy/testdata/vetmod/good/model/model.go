package model

// Results of a search: declared in another package of the module, whose
// comments carmy gen and carmy vet read from its source.
type Results struct {
	// Hits, best first.
	Hits []Hit `json:"hits"`
}

// Hit is one thing found.
type Hit struct {
	// Title of the thing.
	Title string `json:"title"`
}
