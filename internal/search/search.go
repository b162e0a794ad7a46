// Package search ranks tools for a query: Okapi BM25 over the words of
// each tool's name, description, input field names and field
// descriptions, with the name's and the field names' words counting more
// than prose (a BM25F-style weighting: a word in the name is a stronger
// sign of what the tool does than the same word in a sentence).
//
// BM25 rather than embeddings: it needs no model, ranks in microseconds
// over thousands of tools, and is what the hosts' own tool search
// (Anthropic's tool_search_tool_bm25) does, so a model gets the results
// it expects.
//
// An [Index] is immutable: the registry builds a new one when its tools
// change, and searches read whichever index is current.
package search

import (
	"container/heap"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Doc is what the index knows of one tool.
type Doc struct {
	Name        string
	Description string
	InputSchema json.RawMessage // field names and descriptions are read from it
}

// The weight of a word by where it was found.
const (
	weightName      = 3
	weightField     = 2
	weightProse     = 1
	k1              = 1.2
	b               = 0.75
	maxSchemaFields = 1000 // fields read per schema: a huge schema does not drown its tool's name
)

// Index is an immutable BM25 index over a list of docs, which it knows
// by their position in that list.
type Index struct {
	postings map[string][]posting
	norm     []float32 // k1·(1−b+b·len/avglen) per doc
	n        int
	scratch  sync.Pool // *scorer
}

type posting struct {
	doc int32
	tf  float32 // the weighted count of the word in the doc
}

// New indexes docs.
func New(docs []Doc) *Index {
	ix := &Index{postings: map[string][]posting{}, norm: make([]float32, len(docs)), n: len(docs)}
	lengths := make([]float32, len(docs))
	var total float64
	tf := map[string]float32{}
	for i, d := range docs {
		clear(tf)
		add := func(text string, w float32) {
			for _, t := range Terms(text) {
				tf[t] += w
				lengths[i] += w
			}
		}
		add(d.Name, weightName)
		add(d.Description, weightProse)
		fieldsOf(d.InputSchema, func(name, desc string) {
			add(name, weightField)
			add(desc, weightProse)
		})
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), tf: f})
		}
		total += float64(lengths[i])
	}
	avg := float32(1)
	if len(docs) > 0 && total > 0 {
		avg = float32(total / float64(len(docs)))
	}
	for i, l := range lengths {
		ix.norm[i] = k1 * (1 - b + b*l/avg)
	}
	ix.scratch.New = func() any { return &scorer{score: make([]float32, ix.n)} }
	return ix
}

// Len returns the number of docs indexed.
func (ix *Index) Len() int { return ix.n }

// Search calls yield with the docs that match query, best first, until
// yield returns false or no doc is left. Docs that match no word of the
// query are never yielded. Ties keep the docs' order.
func (ix *Index) Search(query string, yield func(doc int) bool) {
	terms := Terms(query)
	if len(terms) == 0 || ix.n == 0 {
		return
	}
	s := ix.scratch.Get().(*scorer)
	defer func() {
		for _, d := range s.hits {
			s.score[d] = 0
		}
		s.hits = s.hits[:0]
		ix.scratch.Put(s)
	}()
	seen := make(map[string]bool, len(terms))
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := float32(math.Log(1 + (float64(ix.n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5)))
		for _, p := range ps {
			if s.score[p.doc] == 0 {
				s.hits = append(s.hits, p.doc)
			}
			s.score[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + ix.norm[p.doc])
		}
	}
	// A heap rather than a sort: the caller usually stops after a few
	// docs, and building a heap is linear.
	h := ranking{s}
	heap.Init(h)
	for h.Len() > 0 {
		if !yield(int(heap.Pop(h).(int32))) {
			return
		}
	}
}

// scorer is one search's scores, kept between searches so that a search
// allocates nearly nothing.
type scorer struct {
	score []float32 // by doc; 0 for a doc no word matched
	hits  []int32   // the docs with a score
}

// ranking is a max-heap of a scorer's hits. Popping takes from the end of
// hits, which the search then resets, so a fresh slice is not needed.
type ranking struct{ s *scorer }

func (r ranking) Len() int { return len(r.s.hits) }
func (r ranking) Less(i, j int) bool {
	a, b := r.s.hits[i], r.s.hits[j]
	if sa, sb := r.s.score[a], r.s.score[b]; sa != sb {
		return sa > sb
	}
	return a < b
}
func (r ranking) Swap(i, j int) { r.s.hits[i], r.s.hits[j] = r.s.hits[j], r.s.hits[i] }
func (r ranking) Push(x any)    { r.s.hits = append(r.s.hits, x.(int32)) }
func (r ranking) Pop() any {
	n := len(r.s.hits) - 1
	d := r.s.hits[n]
	r.s.hits = r.s.hits[:n]
	r.s.score[d] = 0 // popped: nothing to reset later
	return d
}

// Terms returns the words of text as the index knows them: split at
// everything but letters and digits, at the humps of camelCase and
// between an acronym and the word after it (getHTTPStatus: get, http,
// status), lower case, a plural's final s dropped, short common English
// words left out.
func Terms(text string) []string {
	var out []string
	start := -1
	var prev rune
	flush := func(end int) {
		if start >= 0 {
			if t := normalize(text[start:end]); t != "" {
				out = append(out, t)
			}
		}
		start = -1
	}
	for i, r := range text {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush(i)
		case start < 0:
			start = i
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush(i)
			start = i
		case unicode.IsLower(r) && unicode.IsUpper(prev) && i-start > utf8.RuneLen(prev):
			// HTTPStatus: the S starts Status.
			p := i - utf8.RuneLen(prev)
			flush(p)
			start = p
		}
		prev = r
	}
	flush(len(text))
	return out
}

func normalize(w string) string {
	w = strings.ToLower(w)
	if stopWords[w] {
		return ""
	}
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// stopWords carry no meaning of their own in a tool's description.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"for": true, "from": true, "in": true, "into": true, "is": true, "it": true, "its": true, "of": true,
	"on": true, "or": true, "that": true, "the": true, "this": true, "to": true, "with": true,
}

// fieldsOf calls f with the name and description of every property of a
// JSON Schema, nested ones and those of $defs included.
func fieldsOf(schema json.RawMessage, f func(name, desc string)) {
	if len(schema) == 0 {
		return
	}
	var root any
	if json.Unmarshal(schema, &root) != nil {
		return
	}
	n := 0
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		o, ok := v.(map[string]any)
		if !ok || depth > 16 {
			return
		}
		if props, ok := o["properties"].(map[string]any); ok {
			for name, p := range props {
				if n++; n > maxSchemaFields {
					return
				}
				desc := ""
				if po, ok := p.(map[string]any); ok {
					desc, _ = po["description"].(string)
				}
				f(name, desc)
				walk(p, depth+1)
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			walk(o[k], depth+1)
		}
		for _, k := range []string{"$defs", "definitions"} {
			if defs, ok := o[k].(map[string]any); ok {
				for _, d := range defs {
					walk(d, depth+1)
				}
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if list, ok := o[k].([]any); ok {
				for _, d := range list {
					walk(d, depth+1)
				}
			}
		}
	}
	walk(root, 0)
}
