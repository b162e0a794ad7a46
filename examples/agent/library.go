package main

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/carmy-dev/carmy"
)

// The tools the agent gets: a small lending library.

// Book is a book of the library.
type Book struct {
	ID        int    `json:"id"`
	Title     string `json:"title"`
	Author    string `json:"author"`
	Available bool   `json:"available"`
}

// Loan is a book lent to someone.
type Loan struct {
	BookID   int    `json:"book_id"`
	Title    string `json:"title"`
	Borrower string `json:"borrower"`
	Due      string `json:"due" jsonschema:"description=The day the book is due back (YYYY-MM-DD)"`
}

// Library is the tools' state: books and loans, in memory.
type Library struct {
	mu    sync.Mutex
	now   func() time.Time
	books []Book
	loans []Loan
}

// NewLibrary returns a library with a few books, whose clock is now.
func NewLibrary(now func() time.Time) *Library {
	return &Library{now: now, books: []Book{
		{ID: 1, Title: "A Wizard of Earthsea", Author: "Ursula K. Le Guin"},
		{ID: 2, Title: "The Dispossessed", Author: "Ursula K. Le Guin", Available: true},
		{ID: 3, Title: "The Left Hand of Darkness", Author: "Ursula K. Le Guin", Available: true},
		{ID: 4, Title: "Kindred", Author: "Octavia E. Butler", Available: true},
	}}
}

// Loans returns the loans made so far.
func (l *Library) Loans() []Loan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.loans)
}

// FindBooks is the input of find_books. Every field is optional: OpenAI's
// strict mode makes the model send each one, null when it has nothing to
// say, and llm.Dispatch drops those nulls again.
type FindBooks struct {
	Title         *string `json:"title" jsonschema:"description=Words from the title"`
	Author        *string `json:"author" jsonschema:"description=Part of the author's name"`
	AvailableOnly bool    `json:"available_only,omitempty" jsonschema:"description=Only books that can be borrowed now"`
	Limit         *int    `json:"limit" validate:"omitempty,min=1,max=20" jsonschema:"description=At most this many books (default 5)"`
}

var findBooksTool = carmy.Tool(findBooks, carmy.Read,
	carmy.Description("Search the library's catalogue by title and author"),
	carmy.ParallelSafe(),
	carmy.Register(false),
)

func findBooks(lib carmy.State[*Library], in FindBooks) ([]Book, error) {
	l := lib.Value
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := 5
	if in.Limit != nil {
		limit = *in.Limit
	}
	found := []Book{}
	for _, b := range l.books {
		switch {
		case in.Title != nil && !contains(b.Title, *in.Title),
			in.Author != nil && !contains(b.Author, *in.Author),
			in.AvailableOnly && !b.Available:
			continue
		}
		if len(found) == limit {
			break
		}
		found = append(found, b)
	}
	return found, nil
}

func contains(s, sub string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(sub)) }

// BorrowBook is the input of borrow_book.
type BorrowBook struct {
	BookID int `json:"book_id" validate:"min=1"`
	Days   int `json:"days" validate:"min=1,max=30" jsonschema:"description=Length of the loan in days"`
}

var borrowBookTool = carmy.Tool(borrowBook, carmy.Write,
	carmy.Description("Borrow a book for the user"),
	carmy.Register(false),
)

func borrowBook(ctx carmy.Context, lib carmy.State[*Library], in BorrowBook) (Loan, error) {
	l := lib.Value
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.books, func(b Book) bool { return b.ID == in.BookID })
	switch {
	case i < 0:
		return Loan{}, carmy.Errorf(carmy.CodeNotFound, "there is no book %d; find one with find_books", in.BookID)
	case !l.books[i].Available:
		return Loan{}, carmy.Errorf(carmy.CodeConflict, "%q is out on loan; choose another book", l.books[i].Title)
	}
	l.books[i].Available = false
	loan := Loan{
		BookID:   in.BookID,
		Title:    l.books[i].Title,
		Borrower: ctx.Principal,
		Due:      l.now().AddDate(0, 0, in.Days).Format(time.DateOnly),
	}
	l.loans = append(l.loans, loan)
	return loan, nil
}

// newRegistry builds the agent's tools over a library.
func newRegistry(lib *Library) (*carmy.Registry, error) {
	return carmy.New().Tool(findBooksTool, borrowBookTool).State(lib).Build()
}
