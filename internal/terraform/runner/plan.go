package runner

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// A plan run (api.OperationPlan) saves its plan in the cluster's state bucket, next to the state
// (api.PlanKey), encrypted like it (a plan holds state values), and reports its summary; the apply
// run of the approved plan loads it from there and applies exactly it. Every call carries the
// expected bucket owner (the run's account), as every state bucket call does.

// maxPlanBytes bounds a plan loaded back: a cluster's plan is a few hundred KB.
const maxPlanBytes = 64 << 20

// PlanAPI is the part of the S3 API SavePlan and LoadPlan use (*s3.Client).
type PlanAPI interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// SavePlan uploads the plan file at path to bucket/key.
func SavePlan(ctx context.Context, client PlanAPI, bucket, key, owner, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to read the saved plan: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("failed to read the saved plan: %w", err)
	}
	_, err = client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(st.Size()),
		ExpectedBucketOwner: aws.String(owner), ServerSideEncryption: s3types.ServerSideEncryptionAes256,
	})
	if err != nil {
		return fmt.Errorf("failed to save the plan to s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// LoadPlan downloads bucket/key into the plan file at path.
func LoadPlan(ctx context.Context, client PlanAPI, bucket, key, owner, path string) error {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ExpectedBucketOwner: aws.String(owner)})
	if err != nil {
		return fmt.Errorf("failed to load the approved plan s3://%s/%s: %w", bucket, key, err)
	}
	defer func() { _ = out.Body.Close() }()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("failed to write the approved plan: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(out.Body, maxPlanBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("failed to load the approved plan s3://%s/%s: %w", bucket, key, err)
	case n > maxPlanBytes:
		return fmt.Errorf("the approved plan s3://%s/%s is larger than %d bytes", bucket, key, maxPlanBytes)
	}
	return nil
}

// Summarize counts a plan's resource changes as `terraform plan` does: a create is an add, an
// update a change, a delete a destroy, a replacement (delete and create, either order) one add
// and one destroy; reads and no-ops are nothing.
func Summarize(p *tfjson.Plan) api.PlanSummary {
	var s api.PlanSummary
	if p == nil {
		return s
	}
	for _, rc := range p.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		a := rc.Change.Actions
		switch {
		case a.Replace():
			s.Add++
			s.Destroy++
		case a.Create():
			s.Add++
		case a.Update():
			s.Change++
		case a.Delete():
			s.Destroy++
		}
	}
	return s
}
