package runner

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// BucketAPI is the part of the S3 API EnsureStateBucket uses (*s3.Client).
type BucketAPI interface {
	HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	CreateBucket(context.Context, *s3.CreateBucketInput, ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
	PutBucketVersioning(context.Context, *s3.PutBucketVersioningInput, ...func(*s3.Options)) (*s3.PutBucketVersioningOutput, error)
	PutBucketEncryption(context.Context, *s3.PutBucketEncryptionInput, ...func(*s3.Options)) (*s3.PutBucketEncryptionOutput, error)
	PutPublicAccessBlock(context.Context, *s3.PutPublicAccessBlockInput, ...func(*s3.Options)) (*s3.PutPublicAccessBlockOutput, error)
}

// CallerAPI is the part of the STS API CallerAccount uses (*sts.Client).
type CallerAPI interface {
	GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

var accountRe = regexp.MustCompile(`^[0-9]{12}$`)

// CallerAccount is the AWS account of the run's credentials, as sts:GetCallerIdentity says (it
// needs no permission: "GetCallerIdentity", AWS STS API Reference): the account every state
// bucket the run uses must belong to.
func CallerAccount(ctx context.Context, client CallerAPI) (string, error) {
	out, err := client.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("failed to ask STS which AWS account the run's credentials belong to: %w", err)
	}
	account := aws.ToString(out.Account)
	if !accountRe.MatchString(account) {
		return "", fmt.Errorf("STS named account %q for the run's credentials, which is not an AWS account ID", account)
	}
	return account, nil
}

// EnsureStateBucket makes bucket a Terraform state bucket in region owned by account owner (the
// run's, CallerAccount), whether or not it exists: created when HeadBucket finds none (with a
// LocationConstraint outside us-east-1, where S3 refuses one; BucketAlreadyOwnedByYou from a
// concurrent run counts as created) and then looked at again, then always versioning enabled
// (every state version kept), default encryption SSE-S3 with an S3 Bucket Key, and every public
// access block on. Repeating it changes nothing.
//
// Every call but CreateBucket (which has no such parameter) carries ExpectedBucketOwner, so S3
// itself refuses, with 403, to act on a bucket another account owns ("Verifying bucket ownership
// with bucket owner condition", S3 User Guide): bucket names are global, and a bucket of the
// run's name created by someone else, even one whose policy lets this account write, is never
// used. Such a bucket (BucketAlreadyExists on CreateBucket, or 403 on HeadBucket) is an error
// naming the bucket and the account, and nothing is written to it.
func EnsureStateBucket(ctx context.Context, client BucketAPI, bucket, region, owner string) error {
	if !accountRe.MatchString(owner) {
		return fmt.Errorf("the expected owner of state bucket %s must be an AWS account ID, not %q", bucket, owner)
	}
	notOurs := func(how string, err error) error {
		return fmt.Errorf("state bucket %s is not owned by AWS account %s, whose credentials the run uses (%s): the platform never keeps state in a bucket another account owns or can reach; bucket names are global, so someone may have taken this one: choose another spec.provisioning.terraformEnvironment: %w", bucket, owner, how, err)
	}
	head := func() error {
		_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket), ExpectedBucketOwner: aws.String(owner)})
		return err
	}
	err := head()
	var notFound *s3types.NotFound
	switch {
	case err == nil:
	case errors.As(err, &notFound):
		in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
		if region != "us-east-1" {
			in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
		}
		_, err := client.CreateBucket(ctx, in)
		var owned *s3types.BucketAlreadyOwnedByYou
		var taken *s3types.BucketAlreadyExists
		switch {
		case err == nil, errors.As(err, &owned):
		case errors.As(err, &taken):
			return notOurs("CreateBucket answered BucketAlreadyExists", err)
		default:
			return fmt.Errorf("failed to create state bucket %s in %s: %w", bucket, region, err)
		}
		// CreateBucket takes no owner condition: ask again with it before anything is written.
		if err := head(); err != nil {
			if httpStatus(err) == 403 {
				return notOurs("403 on HeadBucket with the bucket owner condition after creating it", err)
			}
			return fmt.Errorf("failed to look up state bucket %s after creating it: %w", bucket, err)
		}
	case httpStatus(err) == 403:
		return notOurs("403 on HeadBucket with the bucket owner condition", err)
	default:
		return fmt.Errorf("failed to look up state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		ExpectedBucketOwner:     aws.String(owner),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		return fmt.Errorf("failed to enable versioning of state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{
		Bucket:              aws.String(bucket),
		ExpectedBucketOwner: aws.String(owner),
		ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAes256},
			BucketKeyEnabled:                   aws.Bool(true),
		}}},
	}); err != nil {
		return fmt.Errorf("failed to set default encryption of state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket:              aws.String(bucket),
		ExpectedBucketOwner: aws.String(owner),
		PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
			BlockPublicAcls:       aws.Bool(true),
			IgnorePublicAcls:      aws.Bool(true),
			BlockPublicPolicy:     aws.Bool(true),
			RestrictPublicBuckets: aws.Bool(true),
		},
	}); err != nil {
		return fmt.Errorf("failed to block public access to state bucket %s: %w", bucket, err)
	}
	return nil
}

// httpStatus is the HTTP status of an AWS API error, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// apiErrorCode is the error code of an AWS API error, or "".
func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
