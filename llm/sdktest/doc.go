// Package sdktest checks the definitions that package llm exports against
// the providers' own SDK types (anthropic-sdk-go and openai-go): each
// definition decodes into the SDK's request type with its members where
// the SDK has them, and what the SDK writes for the provider's tool
// search is what llm writes. It is a module of its own, so that carmy
// itself depends on no provider SDK.
package sdktest
