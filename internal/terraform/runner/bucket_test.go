package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/go-cmp/cmp"

	"github.com/kubeopera/kubeopera/test/sim"
)

func TestEnsureStateBucket(t *testing.T) {
	e := sim.StartAWS(t)
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
		if err := EnsureStateBucket(ctx, client("eu-north-1"), "kubeopera-terraform-state-dev", "eu-north-1", sim.AWSAccountID); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"HeadBucket", "CreateBucket", "HeadBucket", "PutBucketVersioning", "PutBucketEncryption", "PutPublicAccessBlock",
		"HeadBucket", "PutBucketVersioning", "PutBucketEncryption", "PutPublicAccessBlock",
	}
	if d := cmp.Diff(want, ops()); d != "" {
		t.Errorf("S3 calls (-want +got):\n%s", d)
	}
	b, ok := e.S3.Bucket("kubeopera-terraform-state-dev")
	if !ok || b.Region != "eu-north-1" || b.Owner != sim.AWSAccountID {
		t.Fatalf("bucket %+v", b)
	}
	if b.Encryption != (sim.Encryption{SSEAlgorithm: "AES256", BucketKeyEnabled: true}) || b.PublicAccessBlock != (sim.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}) {
		t.Errorf("bucket %+v", b)
	}
	if v, _ := e.S3.Versioning("kubeopera-terraform-state-dev"); v != "Enabled" {
		t.Errorf("versioning %q", v)
	}

	// us-east-1 takes no location constraint.
	if err := EnsureStateBucket(ctx, client("us-east-1"), "kubeopera-terraform-state-east", "us-east-1", sim.AWSAccountID); err != nil {
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
	err     error
	created bool
}

// HeadBucket answers 404 until CreateBucket was called.
func (r *racingBucket) HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error) {
	if r.created {
		return &s3.HeadBucketOutput{}, nil
	}
	return nil, &s3types.NotFound{}
}

func (r *racingBucket) CreateBucket(context.Context, *s3.CreateBucketInput, ...func(*s3.Options)) (*s3.CreateBucketOutput, error) {
	r.created = r.err == nil || errors.As(r.err, new(*s3types.BucketAlreadyOwnedByYou))
	return nil, r.err
}

func (r *racingBucket) PutBucketVersioning(context.Context, *s3.PutBucketVersioningInput, ...func(*s3.Options)) (*s3.PutBucketVersioningOutput, error) {
	return &s3.PutBucketVersioningOutput{}, nil
}

func (r *racingBucket) PutBucketEncryption(context.Context, *s3.PutBucketEncryptionInput, ...func(*s3.Options)) (*s3.PutBucketEncryptionOutput, error) {
	return &s3.PutBucketEncryptionOutput{}, nil
}

func (r *racingBucket) PutPublicAccessBlock(context.Context, *s3.PutPublicAccessBlockInput, ...func(*s3.Options)) (*s3.PutPublicAccessBlockOutput, error) {
	return &s3.PutPublicAccessBlockOutput{}, nil
}

func TestEnsureStateBucketRaces(t *testing.T) {
	if err := EnsureStateBucket(t.Context(), &racingBucket{err: &s3types.BucketAlreadyOwnedByYou{}}, "b-1", "eu-north-1", sim.AWSAccountID); err != nil {
		t.Errorf("BucketAlreadyOwnedByYou is success: %v", err)
	}
	err := EnsureStateBucket(t.Context(), &racingBucket{err: &s3types.BucketAlreadyExists{}}, "b-1", "eu-north-1", sim.AWSAccountID)
	if err == nil || !strings.Contains(err.Error(), "state bucket b-1 is not owned by AWS account "+sim.AWSAccountID) {
		t.Errorf("BucketAlreadyExists: %v", err)
	}
	if err := EnsureStateBucket(t.Context(), &racingBucket{}, "b-1", "eu-north-1", "not-an-account"); err == nil {
		t.Error("an expected owner that is not an account ID was accepted")
	}
}

// A state bucket of the run's name taken by another account, even one that lets the run's
// account write, is refused with a message naming the bucket and the account, and nothing is
// written to it: every call carries the bucket owner condition.
func TestEnsureStateBucketRefusesASquattedBucket(t *testing.T) {
	e := sim.StartAWS(t)
	ctx := t.Context()
	client := func(c sim.AWSCredentials) *s3.Client {
		return s3.NewFromConfig(aws.Config{Region: "eu-north-1", Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""), BaseEndpoint: aws.String(e.URL)})
	}
	const squatterAccount = "999999999999"
	squatter := client(e.AddUserInAccount(squatterAccount, "squatter"))
	tenant := e.AddUser("tenant")
	for _, shared := range []bool{false, true} {
		bucket := fmt.Sprintf("kubeopera-terraform-state-dev-shared-%t", shared)
		if _, err := squatter.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket),
			CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-north-1"}}); err != nil {
			t.Fatal(err)
		}
		if shared {
			// The squatter's bucket policy lets the tenant's account write: what a squatter wants.
			if err := e.S3.GrantAccount(bucket, sim.AWSAccountID); err != nil {
				t.Fatal(err)
			}
		}
		before := len(e.Requests("s3"))
		err := EnsureStateBucket(ctx, client(tenant), bucket, "eu-north-1", sim.AWSAccountID)
		want := "state bucket " + bucket + " is not owned by AWS account " + sim.AWSAccountID + ", whose credentials the run uses"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("shared=%t: %v, want an error saying %q", shared, err, want)
		}
		for _, r := range e.Requests("s3")[before:] {
			if r.Operation != "HeadBucket" || r.Status != 403 {
				t.Errorf("shared=%t: %s %s answered %d: only a refused HeadBucket may reach another account's bucket", shared, r.Operation, r.Resource, r.Status)
			}
		}
		if v, _ := e.S3.Versioning(bucket); v != "" {
			t.Errorf("shared=%t: versioning of the squatted bucket was set to %q", shared, v)
		}
	}
}

func TestCallerAccount(t *testing.T) {
	e := sim.StartAWS(t)
	for account, user := range map[string]sim.AWSCredentials{sim.AWSAccountID: e.AddUser("a"), "210987654321": e.AddUserInAccount("210987654321", "b")} {
		c := sts.NewFromConfig(aws.Config{Region: "eu-north-1", Credentials: credentials.NewStaticCredentialsProvider(user.AccessKeyID, user.SecretAccessKey, ""), BaseEndpoint: aws.String(e.URL)})
		got, err := CallerAccount(t.Context(), c)
		if err != nil || got != account {
			t.Errorf("CallerAccount = %q, %v; want %s", got, err, account)
		}
	}
}
