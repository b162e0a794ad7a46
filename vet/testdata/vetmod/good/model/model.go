package model

import "example.com/vetmod/good/model/price"

// Results of a search: declared in another package of the module, whose
// comments carmy gen reads from its source and carmy vet from its analysis.
type Results struct {
	// Hits, best first.
	Hits []Hit `json:"hits"`
}

// Hit is one thing found.
type Hit struct {
	// Title of the thing.
	Title string `json:"title"`
	// Price of the thing, from a package that package good does not import.
	Price price.Price `json:"price"`
}
