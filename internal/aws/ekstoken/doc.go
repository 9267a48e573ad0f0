// Package ekstoken mints Amazon EKS bearer tokens the way aws-iam-authenticator and
// `aws eks get-token` do: a presigned sts:GetCallerIdentity URL with the cluster name signed into
// the x-k8s-aws-id header, prefixed with "k8s-aws-v1." and base64url-encoded without padding. The
// EKS API server's authenticator replays that URL against STS to learn the caller's identity, so
// the token carries no secret of its own and is valid for 15 minutes after it was signed.
//
// The package is pure apart from the credentials its aws.Config resolves: it makes no network call
// to mint a token (presigning is local), and the only call AssumeRole adds is sts:AssumeRole when
// the wrapped credentials are first retrieved. WrapTransport puts the tokens on a rest.Config's
// requests: the manager reaches provisioned EKS clusters that way, minting in process with
// StaticConfig (nothing read from its own environment) and never starting the exec plugin the
// kubeconfig names. cmd/eks-token-helper is the package's command-line front end, that exec
// plugin, for whoever uses the delivered kubeconfig elsewhere.
package ekstoken
