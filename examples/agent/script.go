package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Script is a Model that plays a conversation back: each step reads the
// request of its turn and writes the model's reply. It stands in for the
// real model in the demo and in tests, where there is no network.
type Script struct {
	Steps    []func(req Request) (Message, error)
	Requests []Request // every request received, in order
}

// Complete runs the next step.
func (s *Script) Complete(_ context.Context, req Request) (Message, error) {
	s.Requests = append(s.Requests, req)
	n := len(s.Requests)
	if n > len(s.Steps) {
		return Message{}, fmt.Errorf("the script has %d steps; turn %d asked for more", len(s.Steps), n)
	}
	return s.Steps[n-1](req)
}

// callTool is a reply that calls one tool.
func callTool(id, name, args string) Message {
	return Message{Role: "assistant", ToolCalls: []ToolCall{{
		ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args},
	}}}
}

// lastResult decodes the result of the last tool call into v, or returns
// the error the tool reported.
func lastResult(req Request, v any) error {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "tool" {
		return errors.New("the last message is not a tool's result")
	}
	var failed struct {
		Error *struct {
			Code   string `json:"code"`
			Fields []struct {
				Path    string `json:"path"`
				Message string `json:"message"`
			} `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(last.Content), &failed) == nil && failed.Error != nil {
		b, _ := json.Marshal(failed.Error)
		return &toolError{code: failed.Error.Code, text: string(b)}
	}
	return json.Unmarshal([]byte(last.Content), v)
}

type toolError struct{ code, text string }

func (e *toolError) Error() string { return e.text }

// borrowScript is the demo conversation: the user wants a book by Le Guin
// for the summer. The model searches, asks for a loan too long, reads the
// error and asks again within the limit, then answers from the results.
func borrowScript() *Script {
	var book Book
	return &Script{Steps: []func(Request) (Message, error){
		// Strict mode: every field present, null for those left out.
		func(Request) (Message, error) {
			return callTool("call_1", "find_books", `{"title":null,"author":"Le Guin","available_only":true,"limit":null}`), nil
		},
		func(req Request) (Message, error) {
			var books []Book
			if err := lastResult(req, &books); err != nil {
				return Message{}, err
			}
			if len(books) == 0 {
				return Message{Role: "assistant", Content: "No book by Ursula K. Le Guin is available now."}, nil
			}
			book = books[0]
			return callTool("call_2", "borrow_book", `{"book_id":`+strconv.Itoa(book.ID)+`,"days":90}`), nil
		},
		// The tool refused 90 days; the error says the limit.
		func(req Request) (Message, error) {
			var te *toolError
			if err := lastResult(req, &Loan{}); !errors.As(err, &te) || te.code != "invalid_input" {
				return Message{}, fmt.Errorf("the script expected an invalid_input error, got %v", err)
			}
			return callTool("call_3", "borrow_book", `{"book_id":`+strconv.Itoa(book.ID)+`,"days":30}`), nil
		},
		func(req Request) (Message, error) {
			var loan Loan
			if err := lastResult(req, &loan); err != nil {
				return Message{}, err
			}
			return Message{Role: "assistant", Content: fmt.Sprintf(
				"I borrowed %q by %s for you. Loans last at most 30 days, so it is due back on %s.",
				loan.Title, book.Author, loan.Due)}, nil
		},
	}}
}
