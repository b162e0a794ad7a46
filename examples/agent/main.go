// Command agent is an agent loop over carmy tools, in the format of
// OpenAI's function calling: the registry's tools go to the model as
// strict-mode definitions (llm.OpenAITools), and the model's calls
// come back through an llm.Dispatcher, which runs them under every rule of
// the registry.
//
//	go run ./examples/agent
//
// plays a scripted conversation: no network, no API key. With -live it
// asks OpenAI instead (OPENAI_API_KEY; OPENAI_MODEL, default gpt-4o-mini):
//
//	go run ./examples/agent -live "Which books by Octavia Butler can I borrow?"
package main

//go:generate go tool carmy gen

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

const defaultQuestion = "Borrow me a book by Ursula K. Le Guin for the whole summer."

func main() {
	live := flag.Bool("live", false, "ask OpenAI's API (OPENAI_API_KEY, OPENAI_MODEL) instead of playing the script")
	flag.Parse()
	var model Model = borrowScript()
	question := defaultQuestion
	if *live {
		key := os.Getenv("OPENAI_API_KEY")
		if key == "" {
			fmt.Fprintln(os.Stderr, "agent: -live needs OPENAI_API_KEY")
			os.Exit(2)
		}
		name := os.Getenv("OPENAI_MODEL")
		if name == "" {
			name = "gpt-4o-mini"
		}
		model = &OpenAI{BaseURL: "https://api.openai.com/v1", APIKey: key, Model: name}
		if flag.NArg() > 0 {
			question = strings.Join(flag.Args(), " ")
		}
	}
	if err := run(context.Background(), os.Stdout, model, question, time.Now); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// run builds the tools over a fresh library and lets the agent answer one
// question, printing the transcript.
func run(ctx context.Context, w io.Writer, model Model, question string, now func() time.Time) error {
	reg, err := newRegistry(NewLibrary(now))
	if err != nil {
		return err
	}
	defer reg.Close()
	agent := &Agent{Tools: reg, Model: model, Principal: "reader-1", Log: w}
	_, err = agent.Run(ctx, question)
	return err
}
