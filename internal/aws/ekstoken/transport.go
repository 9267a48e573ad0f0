package ekstoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"k8s.io/client-go/transport"
)

// mintTimeout bounds minting one token: with a role, that is one sts:AssumeRole call.
const mintTimeout = 30 * time.Second

// StaticConfig returns the aws.Config a token for a tenant's cluster is minted with: region, the
// static access key creds, and endpoint as the STS base endpoint when not empty (else the SDK
// resolves STS's regional endpoint for region). Unlike config.LoadDefaultConfig it reads nothing
// from the process' environment or shared config files, so no AWS_* variable, profile, web
// identity or instance role of the process that mints the token ever signs it or redirects it.
func StaticConfig(region, endpoint string, creds aws.Credentials) aws.Config {
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.StaticCredentialsProvider{Value: creds},
	}
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
	}
	return cfg
}

// WrapTransport returns a rest.Config.WrapTransport that authenticates every request to EKS
// cluster clusterName with a bearer token minted in process (Token with cfg, wrapped by
// AssumeRole when a role is to be assumed): no exec plugin, no child process. The token is kept
// and minted again when it expires (ExpirationAfterSigning after signing, a minute before EKS
// stops accepting it) or after the API server answered 401 Unauthorized; a request that already
// carries an Authorization header is sent as it is. This is client-go's own token source
// transport (k8s.io/client-go/transport, ResettableTokenSourceWrapTransport with
// NewCachedTokenSource), the one it uses for bearer token files.
func WrapTransport(cfg aws.Config, clusterName string) (func(http.RoundTripper) http.RoundTripper, error) {
	return wrapTransport(cfg, clusterName, time.Now)
}

// wrapTransport is WrapTransport signing at now().
func wrapTransport(cfg aws.Config, clusterName string, now func() time.Time) (func(http.RoundTripper) http.RoundTripper, error) {
	switch {
	case clusterName == "":
		return nil, errors.New("cluster name is required")
	case cfg.Region == "":
		return nil, errors.New("AWS region is required")
	case cfg.Credentials == nil:
		return nil, errors.New("no AWS credentials provider configured")
	}
	src := transport.NewCachedTokenSource(tokenSource{cfg: cfg, clusterName: clusterName, now: now})
	return transport.ResettableTokenSourceWrapTransport(src), nil
}

// tokenSource mints one token per call.
type tokenSource struct {
	cfg         aws.Config
	clusterName string
	now         func() time.Time
}

var _ oauth2.TokenSource = tokenSource{}

// Token implements oauth2.TokenSource.
func (s tokenSource) Token() (*oauth2.Token, error) {
	// oauth2.TokenSource has no context: the request's is not available here.
	ctx, cancel := context.WithTimeout(context.Background(), mintTimeout)
	defer cancel()
	token, expiry, err := Token(ctx, s.cfg, s.clusterName, s.now)
	if err != nil {
		return nil, fmt.Errorf("failed to mint an EKS token for cluster %q: %w", s.clusterName, err)
	}
	return &oauth2.Token{AccessToken: token, TokenType: "Bearer", Expiry: expiry}, nil
}
