package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// ChallengePath is where a console's server proves that it knows the
// secret of its link: `carmy approvals` posts {"nonce": "..."} there, and
// the server answers {"proof": Proof(secret, nonce)}. The secret never
// goes on the wire, so a program that took the port of a server that
// stopped learns nothing of the file's secret, and cannot pass.
const ChallengePath = "/console/challenge"

// Nonce bounds, in characters: enough randomness that no answer is ever
// reused, and a bounded amount of work for the server.
const (
	MinNonce = 32
	MaxNonce = 128
)

// Proof is what a server that holds secret answers to the challenge nonce:
// the hex HMAC-SHA256 of the nonce, keyed by the secret, under a label of
// its own, so that it is no other message's MAC.
func Proof(secret, nonce string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("carmy console challenge\x00"))
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// Proves reports whether proof answers the challenge nonce for secret.
func Proves(secret, nonce, proof string) bool {
	return hmac.Equal([]byte(Proof(secret, nonce)), []byte(proof))
}
