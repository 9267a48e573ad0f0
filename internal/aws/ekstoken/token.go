package ekstoken

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// The token format and its timing, as fixed by the two reference implementations:
//   - kubernetes-sigs/aws-iam-authenticator pkg/token/token.go: v1Prefix = "k8s-aws-v1.",
//     clusterIDHeader = "x-k8s-aws-id", requestPresignParam = 60 ("IT IS IGNORED" by STS, kept for
//     authenticators 0.3.0 and older, which check for a value between 0 and 60),
//     presignedURLExpiration = 15 * time.Minute ("presigned STS urls are valid for 15 minutes after
//     timestamp in x-amz-date"), the token encoded with base64.RawURLEncoding, and the token's
//     expiration set "1 minute before the presigned URL expires for some cushion".
//   - aws/aws-cli awscli/customizations/eks/get_token.py: TOKEN_PREFIX = 'k8s-aws-v1.',
//     K8S_AWS_ID_HEADER = 'x-k8s-aws-id', URL_TIMEOUT = 60, TOKEN_EXPIRATION_MINS = 14 ("STS signs
//     the url for 15 minutes so we are creating a rfc3339 timestamp with expiration in 14 minutes"),
//     the token encoded with urlsafe_b64encode(...).rstrip('=').
const (
	// TokenPrefix starts every EKS bearer token; the rest is the base64url-encoded presigned URL.
	TokenPrefix = "k8s-aws-v1."
	// ClusterIDHeader carries the cluster name; it is signed into the presigned URL, so a token
	// minted for one cluster is refused by another.
	ClusterIDHeader = "x-k8s-aws-id"
	// PresignExpiresSeconds is the X-Amz-Expires value of the presigned URL. STS ignores it (the
	// URL is valid for TokenLifetime regardless); old authenticators require it to be at most 60.
	PresignExpiresSeconds = 60
	// TokenLifetime is how long STS accepts the presigned URL after its X-Amz-Date.
	TokenLifetime = 15 * time.Minute
	// ExpirationAfterSigning is the ExecCredential's expirationTimestamp relative to signing: one
	// minute short of TokenLifetime, so a client refreshes before the API server starts refusing.
	ExpirationAfterSigning = TokenLifetime - time.Minute
)

// Token mints an EKS bearer token for clusterName with the credentials and region of cfg, signed
// at now() (time.Now when nil). The STS endpoint is the one the SDK resolves for cfg: the
// regional endpoint sts.<region>.amazonaws.com, or cfg.BaseEndpoint / AWS_ENDPOINT_URL_STS /
// AWS_ENDPOINT_URL when set (config.LoadDefaultConfig reads the environment variables). expiry is
// when the token should be replaced: ExpirationAfterSigning after signing.
//
// Credentials are retrieved once per token: with AssumeRole that is one sts:AssumeRole call unless
// the cached session outlives the token (see AssumeRole). Nothing is sent to STS to mint the
// token itself.
func Token(ctx context.Context, cfg aws.Config, clusterName string, now func() time.Time) (token string, expiry time.Time, err error) {
	if clusterName == "" {
		return "", time.Time{}, errors.New("cluster name is required")
	}
	if cfg.Region == "" {
		return "", time.Time{}, errors.New("AWS region is required")
	}
	if cfg.Credentials == nil {
		return "", time.Time{}, errors.New("no AWS credentials provider configured")
	}
	if now == nil {
		now = time.Now
	}

	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("failed to retrieve AWS credentials: %w", err)
	}
	if !creds.HasKeys() {
		return "", time.Time{}, errors.New("the AWS credentials have no access key")
	}

	// X-Amz-Date has a resolution of one second; truncating here makes expiry exactly
	// ExpirationAfterSigning after the signed timestamp.
	signedAt := now().UTC().Truncate(time.Second)
	client := sts.NewFromConfig(cfg, func(o *sts.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: creds}
	})
	presignClient := sts.NewPresignClient(client, func(o *sts.PresignOptions) {
		o.Presigner = clusterPresigner{signer: v4.NewSigner(), clusterName: clusterName, signedAt: signedAt}
	})
	req, err := presignClient.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("failed to presign sts:GetCallerIdentity for cluster %q: %w", clusterName, err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), signedAt.Add(ExpirationAfterSigning), nil
}

// clusterPresigner is the SigV4 presigner of the GetCallerIdentity request: before signing it adds
// the x-k8s-aws-id header (kept a signed header, not hoisted into the query, since it does not
// start with X-Amz-) and the X-Amz-Expires query parameter, which the SDK's presigner leaves to
// the caller, and it signs at the caller's clock instead of the SDK's.
type clusterPresigner struct {
	signer      *v4.Signer
	clusterName string
	signedAt    time.Time
}

var _ sts.HTTPPresignerV4 = clusterPresigner{}

func (p clusterPresigner) PresignHTTP(
	ctx context.Context, creds aws.Credentials, r *http.Request,
	payloadHash, service, region string, _ time.Time,
	optFns ...func(*v4.SignerOptions),
) (string, http.Header, error) {
	r = r.Clone(ctx)
	r.Header.Set(ClusterIDHeader, p.clusterName)
	query := r.URL.Query()
	query.Set("X-Amz-Expires", strconv.Itoa(PresignExpiresSeconds))
	r.URL.RawQuery = query.Encode()
	return p.signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, p.signedAt, optFns...)
}
