package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/go-cmp/cmp"

	"github.com/kubeopera/kubeopera/test/framework/awsfake"
)

func TestEnsureStateBucket(t *testing.T) {
	e := awsfake.Start(t)
	user := e.AddUser("provisioner")
	client := func(region string) *s3.Client {
		return s3.NewFromConfig(aws.Config{
			Region:       region,
			Credentials:  credentials.NewStaticCredentialsProvider(user.AccessKeyID, user.SecretAccessKey, ""),
			BaseEndpoint: aws.String(e.URL),
		})
	}
	ctx := t.Context()
	ops := func() []string {
		var out []string
		for _, r := range e.Requests("s3") {
			out = append(out, r.Operation)
		}
		return out
	}

	// Created in its region, then configured; a second run finds it and configures it again.
	for range 2 {
		if err := EnsureStateBucket(ctx, client("eu-north-1"), "kubeopera-terraform-state-dev", "eu-north-1"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"HeadBucket", "CreateBucket", "PutBucketVersioning", "PutBucketEncryption", "PutPublicAccessBlock",
		"HeadBucket", "PutBucketVersioning", "PutBucketEncryption", "PutPublicAccessBlock",
	}
	if d := cmp.Diff(want, ops()); d != "" {
		t.Errorf("S3 calls (-want +got):\n%s", d)
	}
	b, ok := e.S3.Bucket("kubeopera-terraform-state-dev")
	if !ok || b.Region != "eu-north-1" {
		t.Fatalf("bucket %+v", b)
	}
	if b.Encryption != (awsfake.Encryption{SSEAlgorithm: "AES256", BucketKeyEnabled: true}) || b.PublicAccessBlock != (awsfake.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}) {
		t.Errorf("bucket %+v", b)
	}
	if v, _ := e.S3.Versioning("kubeopera-terraform-state-dev"); v != "Enabled" {
		t.Errorf("versioning %q", v)
	}

	// us-east-1 takes no location constraint.
	if err := EnsureStateBucket(ctx, client("us-east-1"), "kubeopera-terraform-state-east", "us-east-1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.S3.Bucket("kubeopera-terraform-state-east"); b.Region != "us-east-1" {
		t.Errorf("bucket %+v", b)
	}
}

// racingBucket answers HeadBucket 404 and CreateBucket with err: another run created the
// bucket in between, or another account owns its name.
type racingBucket struct {
	BucketAPI
	err error
}

func (r racingBucket) HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error) {
	return nil, &s3types.NotFound{}
}

func (r racingBucket) CreateBucket(context.Context, *s3.CreateBucketInput, ...func(*s3.Options)) (*s3.CreateBucketOutput, error) {
	return nil, r.err
}

func (r racingBucket) PutBucketVersioning(context.Context, *s3.PutBucketVersioningInput, ...func(*s3.Options)) (*s3.PutBucketVersioningOutput, error) {
	return &s3.PutBucketVersioningOutput{}, nil
}

func (r racingBucket) PutBucketEncryption(context.Context, *s3.PutBucketEncryptionInput, ...func(*s3.Options)) (*s3.PutBucketEncryptionOutput, error) {
	return &s3.PutBucketEncryptionOutput{}, nil
}

func (r racingBucket) PutPublicAccessBlock(context.Context, *s3.PutPublicAccessBlockInput, ...func(*s3.Options)) (*s3.PutPublicAccessBlockOutput, error) {
	return &s3.PutPublicAccessBlockOutput{}, nil
}

func TestEnsureStateBucketRaces(t *testing.T) {
	if err := EnsureStateBucket(t.Context(), racingBucket{err: &s3types.BucketAlreadyOwnedByYou{}}, "b-1", "eu-north-1"); err != nil {
		t.Errorf("BucketAlreadyOwnedByYou is success: %v", err)
	}
	err := EnsureStateBucket(t.Context(), racingBucket{err: &s3types.BucketAlreadyExists{}}, "b-1", "eu-north-1")
	if err == nil || !strings.Contains(err.Error(), "state bucket b-1 belongs to another AWS account") {
		t.Errorf("BucketAlreadyExists: %v", err)
	}
}
