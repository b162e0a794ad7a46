package good

// The tools of a package whose generated file is current: nothing to
// report. Its carmy_gen.go is what carmy gen writes (TestVetFixtureCurrent).

import (
	"context"

	"example.com/vetmod/good/model"
	"github.com/carmy-dev/carmy"
)

// Search is the input of search.
type Search struct {
	// Query to look for.
	Query string `json:"query" validate:"required"`
	Limit int    `json:"limit,omitempty"` // Limit of results; 0 for the default.
}

// searchTool is a tool; its own comment is not a type's or a function's.
var searchTool = carmy.Tool(search, carmy.Read)

// Search the catalogue.
func search(ctx context.Context, in Search) (model.Results, error) {
	return model.Results{}, nil
}
