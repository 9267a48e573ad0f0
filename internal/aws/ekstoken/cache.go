package ekstoken

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Inputs are what a cluster's tokens are minted from.
type Inputs struct {
	// Cluster and Region name the EKS cluster; Endpoint, when set, is the STS endpoint the
	// tokens are signed for (StaticConfig).
	Cluster, Region, Endpoint string
	// Credentials sign the tokens, or assume RoleARN when it is set.
	Credentials aws.Credentials
	// Platform, when set, is the identity that assumes RoleARN instead of Credentials; it never
	// signs a token itself, so RoleARN is required with it.
	Platform aws.CredentialsProvider
	// RoleARN is assumed with ExternalID and SessionName; the tokens are signed by its session.
	RoleARN, ExternalID, SessionName string
}

// Cache keeps one token-minting transport wrapper per key (e.g. one HostCluster) across the
// passes that each build a new client, so a token, and an assumed role's session, is minted
// again only when it expires or its inputs change. It keeps a digest of the inputs, never a copy
// of the secret key beyond the wrapper's own.
type Cache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	sum  [sha256.Size]byte
	wrap func(http.RoundTripper) http.RoundTripper
}

// Wrap returns the transport wrapper of key for in, made anew when in changed.
func (c *Cache) Wrap(key string, in Inputs) (func(http.RoundTripper) http.RoundTripper, error) {
	sum := sha256.Sum256([]byte(strings.Join([]string{in.Cluster, in.Region, in.Endpoint, in.Credentials.AccessKeyID,
		in.Credentials.SecretAccessKey, in.Credentials.SessionToken, in.RoleARN, in.ExternalID, in.SessionName, fmt.Sprint(in.Platform != nil)}, "\x00")))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && e.sum == sum {
		return e.wrap, nil
	}
	cfg := StaticConfig(in.Region, in.Endpoint, in.Credentials)
	if in.Platform != nil {
		if in.RoleARN == "" {
			// The platform's identity never signs a tenant's cluster token itself.
			return nil, fmt.Errorf("the platform's AWS identity is used only to assume a role, and the credential names none")
		}
		cfg.Credentials = aws.NewCredentialsCache(in.Platform)
	}
	if in.RoleARN != "" {
		var err error
		if cfg, err = AssumeRole(cfg, Role{ARN: in.RoleARN, ExternalID: in.ExternalID, SessionName: in.SessionName}); err != nil {
			return nil, err
		}
	}
	wrap, err := WrapTransport(cfg, in.Cluster)
	if err != nil {
		return nil, err
	}
	if c.entries == nil {
		c.entries = map[string]cacheEntry{}
	}
	c.entries[key] = cacheEntry{sum: sum, wrap: wrap}
	return wrap, nil
}

// Forget drops key's entry.
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
