// Command eks-token-helper is the client-go exec credential plugin of the kubeconfigs KubeOpera
// writes for EKS clusters: it mints an EKS bearer token (see internal/aws/ekstoken) and prints it
// as a client.authentication.k8s.io/v1beta1 ExecCredential on stdout.
//
//	eks-token-helper --cluster-name NAME --region REGION [--role-arn ARN [--external-id ID] [--session-name NAME]]
//
// Credentials come from the AWS SDK's default chain: the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, which the kubeconfig's exec env passes when the
// runner embedded them), the shared config and credentials files, then container and instance
// roles. AWS_ENDPOINT_URL_STS / AWS_ENDPOINT_URL redirect both sts:AssumeRole and the presigned
// URL. With --role-arn the token is signed with the role's temporary credentials.
//
// Errors go to stderr with exit status 1 (2 for bad flags); nothing but the ExecCredential is
// ever written to stdout, and no credential is ever written anywhere.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/pflag"

	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
)

// timeout bounds the whole run; client-go waits for the plugin while the user's kubectl hangs.
const timeout = 30 * time.Second

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	clusterName string
	region      string
	roleARN     string
	externalID  string
	sessionName string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("eks-token-helper", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.clusterName, "cluster-name", "", "name of the EKS cluster, signed into the token (required)")
	fs.StringVar(&o.region, "region", "", "AWS region of the cluster and of the STS endpoint (required)")
	fs.StringVar(&o.roleARN, "role-arn", "", "IAM role to assume with sts:AssumeRole; its temporary credentials sign the token")
	fs.StringVar(&o.externalID, "external-id", "", "external ID sent with sts:AssumeRole (requires --role-arn)")
	fs.StringVar(&o.sessionName, "session-name", ekstoken.DefaultSessionName, "role session name for sts:AssumeRole (requires --role-arn)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "eks-token-helper: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	if err := o.validate(fs); err != nil {
		fmt.Fprintf(stderr, "eks-token-helper: %v\n", err)
		fs.Usage()
		return exitUsage
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := execCredential(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "eks-token-helper: %v\n", err)
		return exitError
	}
	if _, err := stdout.Write(append(out, '\n')); err != nil {
		fmt.Fprintf(stderr, "eks-token-helper: failed to write the ExecCredential: %v\n", err)
		return exitError
	}
	return exitOK
}

func (o options) validate(fs *pflag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.clusterName == "":
		return errors.New("--cluster-name is required")
	case o.region == "":
		return errors.New("--region is required")
	case o.roleARN == "" && fs.Changed("external-id"):
		return errors.New("--external-id requires --role-arn")
	case o.roleARN == "" && fs.Changed("session-name"):
		return errors.New("--session-name requires --role-arn")
	}
	return nil
}

// execCredential loads the default AWS config for the region, assumes the role when asked and
// returns the ExecCredential JSON.
func execCredential(ctx context.Context, o options) ([]byte, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(o.region))
	if err != nil {
		return nil, fmt.Errorf("failed to load the AWS configuration: %w", err)
	}
	if o.roleARN != "" {
		cfg, err = ekstoken.AssumeRole(cfg, ekstoken.Role{ARN: o.roleARN, ExternalID: o.externalID, SessionName: o.sessionName})
		if err != nil {
			return nil, err
		}
	}
	token, expiry, err := ekstoken.Token(ctx, cfg, o.clusterName, time.Now)
	if err != nil {
		return nil, err
	}
	return ekstoken.ExecCredential(token, expiry)
}
