package jobrun

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
)

// idLength and idAlphabet make run IDs: random, lowercase, DNS-label safe.
const (
	idLength   = 10
	idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

var idRe = regexp.MustCompile(`^[a-z0-9]{10}$`)

// ValidID reports whether id has the shape of a run ID (10 characters [a-z0-9]).
func ValidID(id string) bool { return idRe.MatchString(id) }

// NewID returns a random run ID.
func NewID() (string, error) {
	b := make([]byte, idLength)
	size := big.NewInt(int64(len(idAlphabet)))
	for i := range b {
		n, err := rand.Int(rand.Reader, size)
		if err != nil {
			return "", fmt.Errorf("failed to generate a run ID: %w", err)
		}
		b[i] = idAlphabet[n.Int64()]
	}
	return string(b), nil
}
