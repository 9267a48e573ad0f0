package sim

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// config is an SDK configuration signed with c, at e, in region.
func config(e *AWS, c AWSCredentials, region string) aws.Config {
	return aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken),
		BaseEndpoint: aws.String(e.URL),
	}
}

// httpCode is the HTTP status of err's response, 0 without one.
func httpCode(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// code is err's AWS error code.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func TestS3(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	user := e.AddUser("alice")
	c := s3.NewFromConfig(config(e, user, "eu-north-1"))

	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("state")}); code(err) != "NotFound" {
		t.Fatalf("HeadBucket of a missing bucket: %v", err)
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("state")}); code(err) != "IllegalLocationConstraintException" {
		t.Fatalf("CreateBucket without a location outside us-east-1: %v", err)
	}
	create := &s3.CreateBucketInput{Bucket: aws.String("state"), CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-north-1"}}
	if _, err := c.CreateBucket(ctx, create); err != nil {
		t.Fatal(err)
	}
	var owned *s3types.BucketAlreadyOwnedByYou
	if _, err := c.CreateBucket(ctx, create); !errors.As(err, &owned) {
		t.Fatalf("CreateBucket again: %v", err)
	}
	head, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("state")})
	if err != nil || aws.ToString(head.BucketRegion) != "eu-north-1" {
		t.Fatalf("HeadBucket: %+v %v", head, err)
	}
	loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("state")})
	if err != nil || loc.LocationConstraint != "eu-north-1" {
		t.Fatalf("GetBucketLocation: %+v %v", loc, err)
	}
	// us-east-1: no location constraint, and creating again is 200 (legacy).
	east := s3.NewFromConfig(config(e, user, "us-east-1"))
	for range 2 {
		if _, err := east.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("east")}); err != nil {
			t.Fatalf("CreateBucket in us-east-1: %v", err)
		}
	}

	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("state"), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	if v, err := e.S3.Versioning("state"); err != nil || v != "Enabled" {
		t.Fatalf("versioning %q %v", v, err)
	}
	if _, err := c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String("state"), ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{Rules: []s3types.ServerSideEncryptionRule{{
		ApplyServerSideEncryptionByDefault: &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryptionAwsKms, KMSMasterKeyID: aws.String("alias/state")},
		BucketKeyEnabled:                   aws.Bool(true),
	}}}}); err != nil {
		t.Fatal(err)
	}
	enc, err := c.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String("state")})
	if err != nil || enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != s3types.ServerSideEncryptionAwsKms {
		t.Fatalf("GetBucketEncryption: %v", err)
	}
	if _, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String("state"), PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	pab, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("state")})
	if err != nil || !aws.ToBool(pab.PublicAccessBlockConfiguration.BlockPublicAcls) || aws.ToBool(pab.PublicAccessBlockConfiguration.BlockPublicPolicy) {
		t.Fatalf("GetPublicAccessBlock: %+v %v", pab, err)
	}
	if b, _ := e.S3.Bucket("state"); b.Encryption.KMSMasterKeyID != "alias/state" || !b.PublicAccessBlock.BlockPublicAcls {
		t.Fatalf("bucket %+v", b)
	}
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("state"), Policy: aws.String("{}")}); code(err) != "NotImplemented" {
		t.Fatalf("PutBucketPolicy: %v", err)
	}

	// Terraform's lock file: a conditional create.
	lock := &s3.PutObjectInput{Bucket: aws.String("state"), Key: aws.String("a/terraform.tfstate.tflock"), Body: strings.NewReader(`{"ID":"1"}`), IfNoneMatch: aws.String("*")}
	if _, err := c.PutObject(ctx, lock); err != nil {
		t.Fatal(err)
	}
	lock.Body = strings.NewReader(`{"ID":"2"}`)
	if _, err := c.PutObject(ctx, lock); code(err) != "PreconditionFailed" {
		t.Fatalf("a second lock: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("state"), Key: lock.Key}); err != nil {
		t.Fatal(err)
	}
	lock.Body = strings.NewReader(`{"ID":"3"}`)
	if _, err := c.PutObject(ctx, lock); err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("state"), Key: lock.Key})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(got.Body)
	if string(body) != `{"ID":"3"}` {
		t.Fatalf("object %s", body)
	}
	if b, err := e.S3.Object("state", "a/terraform.tfstate.tflock"); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("S3.Object: %s %v", b, err)
	}

	// Keys the endpoint did not issue, or signed with the wrong secret, are refused.
	bad := user
	bad.SecretAccessKey = "wrong" + bad.SecretAccessKey[5:]
	if _, err := s3.NewFromConfig(config(e, bad, "eu-north-1")).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("state")}); !strings.Contains(err.Error(), "403") {
		t.Fatalf("HeadBucket with a wrong secret: %v", err)
	}
	if _, err := s3.NewFromConfig(config(e, bad, "eu-north-1")).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("state"), Key: lock.Key}); code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("GetObject with a wrong secret: %v", err)
	}
	if _, err := s3.NewFromConfig(config(e, AWSCredentials{AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: "x"}, "eu-north-1")).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("state"), Key: lock.Key}); code(err) != "InvalidAccessKeyId" {
		t.Fatalf("GetObject with an unknown key: %v", err)
	}
	reqs := e.Requests("s3")
	if len(reqs) == 0 || reqs[0].Operation != "HeadBucket" || reqs[0].AccessKeyID != user.AccessKeyID || reqs[0].Region != "eu-north-1" || reqs[0].Status != 404 {
		t.Fatalf("first request %+v", reqs[0])
	}
}

// Bucket names are global and a bucket is its creator's: another account's key cannot create,
// read or write it, unless the owner's policy lets that account in, and then the bucket owner
// condition still refuses every call that expects another owner.
func TestS3BucketOwnership(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	const squatterAccount = "999999999999"
	owner := s3.NewFromConfig(config(e, e.AddUserInAccount(squatterAccount, "squatter"), "eu-north-1"))
	victim := s3.NewFromConfig(config(e, e.AddUser("victim"), "eu-north-1"))
	create := &s3.CreateBucketInput{Bucket: aws.String("taken"), CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-north-1"}}
	if _, err := owner.CreateBucket(ctx, create); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.S3.Bucket("taken"); b.Owner != squatterAccount {
		t.Fatalf("bucket %+v, want owner %s", b, squatterAccount)
	}
	var exists *s3types.BucketAlreadyExists
	if _, err := victim.CreateBucket(ctx, create); !errors.As(err, &exists) {
		t.Fatalf("CreateBucket of another account's bucket: %v, want BucketAlreadyExists", err)
	}
	east := s3.NewFromConfig(config(e, e.AddUser("victim-east"), "us-east-1"))
	if _, err := s3.NewFromConfig(config(e, e.AddUserInAccount(squatterAccount, "squatter-east"), "us-east-1")).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("taken-east")}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("taken-east")}); !errors.As(err, &exists) {
		t.Fatalf("CreateBucket of another account's bucket in us-east-1: %v, want BucketAlreadyExists (the legacy 200 is for the owner only)", err)
	}

	put := func(c *s3.Client, expected *string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("taken"), Key: aws.String("state"), Body: strings.NewReader("x"), ExpectedBucketOwner: expected})
		return err
	}
	head := func(c *s3.Client, expected *string) error {
		_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("taken"), ExpectedBucketOwner: expected})
		return err
	}
	// Without the owner's policy, another account is refused.
	if err := put(victim, nil); code(err) != "AccessDenied" {
		t.Fatalf("PutObject into another account's bucket: %v, want AccessDenied", err)
	}
	if err := head(victim, nil); httpCode(err) != 403 {
		t.Fatalf("HeadBucket of another account's bucket: %v, want 403", err)
	}
	// With it, the call goes through, unless it carries the bucket owner condition.
	if err := e.S3.GrantAccount("taken", AWSAccountID); err != nil {
		t.Fatal(err)
	}
	if err := head(victim, nil); err != nil {
		t.Fatalf("HeadBucket with the owner's policy: %v", err)
	}
	if err := head(victim, aws.String(AWSAccountID)); httpCode(err) != 403 {
		t.Fatalf("HeadBucket expecting the caller's own account: %v, want 403", err)
	}
	if err := put(victim, aws.String(AWSAccountID)); code(err) != "AccessDenied" {
		t.Fatalf("PutObject expecting the caller's own account: %v, want AccessDenied", err)
	}
	if _, err := victim.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("taken"), ExpectedBucketOwner: aws.String(AWSAccountID),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); code(err) != "AccessDenied" {
		t.Fatalf("PutBucketVersioning expecting the caller's own account: %v, want AccessDenied", err)
	}
	if keys, _ := e.S3.Keys("taken"); len(keys) != 0 {
		t.Fatalf("objects written despite the owner condition: %v", keys)
	}
	// The right expectation is answered; so is the owner's own call.
	if err := head(victim, aws.String(squatterAccount)); err != nil {
		t.Fatalf("HeadBucket expecting the real owner: %v", err)
	}
	if err := put(owner, aws.String(squatterAccount)); err != nil {
		t.Fatalf("the owner's PutObject: %v", err)
	}
	// A missing bucket is still NotFound under the condition.
	if _, err := victim.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("missing"), ExpectedBucketOwner: aws.String(AWSAccountID)}); code(err) != "NotFound" {
		t.Fatalf("HeadBucket of a missing bucket: %v", err)
	}
	// STS names each caller's own account.
	id, err := sts.NewFromConfig(config(e, e.AddUserInAccount(squatterAccount, "who"), "eu-north-1")).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Account) != squatterAccount || aws.ToString(id.Arn) != "arn:aws:iam::"+squatterAccount+":user/who" {
		t.Fatalf("GetCallerIdentity of another account's user: %+v %v", id, err)
	}
}

func TestSTSAssumeRole(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	user := e.AddUser("provisioner")
	role := e.STS.AddRole("provisioning", "ext-123")
	c := sts.NewFromConfig(config(e, user, "eu-north-1"))

	id, err := c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Arn) != "arn:aws:iam::"+AWSAccountID+":user/provisioner" || aws.ToString(id.Account) != AWSAccountID {
		t.Fatalf("GetCallerIdentity: %+v %v", id, err)
	}
	if _, err := c.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), ExternalId: aws.String("wrong")}); code(err) != "AccessDenied" {
		t.Fatalf("AssumeRole with the wrong external id: %v", err)
	}
	if _, err := c.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), ExternalId: aws.String("ext-123"), DurationSeconds: aws.Int32(7200)}); code(err) != "ValidationError" {
		t.Fatalf("AssumeRole for two hours: %v", err)
	}
	out, err := c.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("kubeopera-provision-1"), ExternalId: aws.String("ext-123")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(aws.ToString(out.Credentials.AccessKeyId), "ASIA") || out.Credentials.Expiration.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("credentials %+v", out.Credentials)
	}
	session := AWSCredentials{AccessKeyID: aws.ToString(out.Credentials.AccessKeyId), SecretAccessKey: aws.ToString(out.Credentials.SecretAccessKey), SessionToken: aws.ToString(out.Credentials.SessionToken)}
	id, err = sts.NewFromConfig(config(e, session, "eu-north-1")).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Arn) != "arn:aws:sts::"+AWSAccountID+":assumed-role/provisioning/kubeopera-provision-1" {
		t.Fatalf("GetCallerIdentity as the role: %+v %v", id, err)
	}
	noToken := session
	noToken.SessionToken = ""
	if _, err := sts.NewFromConfig(config(e, noToken, "eu-north-1")).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); code(err) != "InvalidClientTokenId" {
		t.Fatalf("a session key without its token: %v", err)
	}
	calls := e.STS.AssumeRoleCalls()
	if len(calls) != 3 || calls[2].ExternalID != "ext-123" || calls[2].CallerAccessKeyID != user.AccessKeyID || calls[2].Issued.AccessKeyID != session.AccessKeyID || calls[0].Error != "AccessDenied" {
		t.Fatalf("calls %+v", calls)
	}
}

func TestSSM(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	c := ssm.NewFromConfig(config(e, e.AddUser("node"), "eu-north-1"))
	name := "/kubeopera/c-1/admin_kubeconfig"

	var notFound *ssmtypes.ParameterNotFound
	if _, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)}); !errors.As(err, &notFound) {
		t.Fatalf("GetParameter of a missing parameter: %v", err)
	}
	if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("PENDING"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	var exists *ssmtypes.ParameterAlreadyExists
	if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("x")}); !errors.As(err, &exists) {
		t.Fatalf("PutParameter without overwrite: %v", err)
	}
	get := func(decrypt bool) string {
		t.Helper()
		out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(decrypt)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Parameter.Value)
	}
	if get(true) != "PENDING" || get(false) == "PENDING" {
		t.Fatal("a SecureString must be plaintext only with decryption")
	}
	e.SSM.PublishAdminKubeconfig(name, []byte("apiVersion: v1\nkind: Config\n"), 200*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for get(true) == "PENDING" {
		if time.Now().After(deadline) {
			t.Fatal("the node never published")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, _ := base64.StdEncoding.DecodeString(get(true)); string(b) != "apiVersion: v1\nkind: Config\n" {
		t.Fatalf("published %q", b)
	}
	if p, _ := e.SSM.Get(name); p.Version != 2 || p.Type != "SecureString" {
		t.Fatalf("parameter %+v", p)
	}
}
