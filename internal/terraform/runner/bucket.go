package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
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

// EnsureStateBucket makes bucket a Terraform state bucket in region, whether or not it exists:
// created when HeadBucket finds none (with a LocationConstraint outside us-east-1, where S3
// refuses one; BucketAlreadyOwnedByYou from a concurrent run counts as created), then always
// versioning enabled (every state version kept), default encryption SSE-S3 with an S3 Bucket
// Key, and every public access block on. Repeating it changes nothing. A bucket name taken by
// another account (BucketAlreadyExists, or 403 on HeadBucket) is an error naming the bucket.
func EnsureStateBucket(ctx context.Context, client BucketAPI, bucket, region string) error {
	_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
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
			return fmt.Errorf("state bucket %s belongs to another AWS account (bucket names are global): choose another terraformEnvironment", bucket)
		default:
			return fmt.Errorf("failed to create state bucket %s in %s: %w", bucket, region, err)
		}
	case httpStatus(err) == 403:
		return fmt.Errorf("state bucket %s exists but this credential may not use it (403 on HeadBucket; another account may own it): %w", bucket, err)
	default:
		return fmt.Errorf("failed to look up state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		return fmt.Errorf("failed to enable versioning of state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{
		Bucket: aws.String(bucket),
		ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAes256},
			BucketKeyEnabled:                   aws.Bool(true),
		}}},
	}); err != nil {
		return fmt.Errorf("failed to set default encryption of state bucket %s: %w", bucket, err)
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket: aws.String(bucket),
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
