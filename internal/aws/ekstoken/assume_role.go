package ekstoken

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// DefaultSessionName is the role session name AssumeRole uses when Role.SessionName is empty. It
// shows up in CloudTrail and in the assumed-role ARN the EKS authenticator maps to a user.
const DefaultSessionName = "kubeopera-eks-token"

// Role names the IAM role whose temporary credentials sign the token.
type Role struct {
	// ARN of the role to assume; required.
	ARN string
	// ExternalID is sent as sts:AssumeRole's ExternalId when not empty, for roles whose trust
	// policy requires one.
	ExternalID string
	// SessionName is the role session name; DefaultSessionName when empty.
	SessionName string
}

// SessionDuration is how long an AssumeRole session lasts: one hour, the longest a role with the
// default MaxSessionDuration grants (and the cap for role chaining).
const SessionDuration = time.Hour

// AssumeRole returns a copy of cfg whose credentials are the temporary credentials of role,
// obtained with sts:AssumeRole signed by cfg's own credentials at cfg's STS endpoint. The call is
// made when the credentials are first retrieved (by Token), not here. The session lasts
// SessionDuration; its credentials are reused for a new token only while they outlive the
// token's TokenLifetime (a presigned URL is no longer accepted once the credentials that signed
// it expired), so a long-lived caller (WrapTransport) assumes the role about every 45 minutes.
func AssumeRole(cfg aws.Config, role Role) (aws.Config, error) {
	if role.ARN == "" {
		return aws.Config{}, errors.New("role ARN is required")
	}
	sessionName := role.SessionName
	if sessionName == "" {
		sessionName = DefaultSessionName
	}
	provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), role.ARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = sessionName
		o.Duration = SessionDuration
		if role.ExternalID != "" {
			o.ExternalID = aws.String(role.ExternalID)
		}
	})
	out := cfg.Copy()
	out.Credentials = aws.NewCredentialsCache(provider, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = TokenLifetime })
	return out, nil
}
