package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// OpenAI is the Model of OpenAI's Chat Completions API, over plain HTTP.
type OpenAI struct {
	BaseURL string // "https://api.openai.com/v1"
	APIKey  string
	Model   string // "gpt-4o-mini", or any model with strict function calling
	Client  *http.Client
}

// Complete sends one request and returns the model's message.
func (o *OpenAI) Complete(ctx context.Context, req Request) (Message, error) {
	req.Model = o.Model
	body, err := json.Marshal(req)
	if err != nil {
		return Message{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Message{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return Message{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return Message{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Message{}, fmt.Errorf("openai: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var out struct {
		Choices []struct {
			Message Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Message{}, fmt.Errorf("openai: %w", err)
	}
	if len(out.Choices) == 0 {
		return Message{}, fmt.Errorf("openai: the response has no choices: %s", data)
	}
	return out.Choices[0].Message, nil
}
