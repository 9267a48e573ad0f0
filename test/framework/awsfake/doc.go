// Package awsfake plays AWS for the provisioner's tests (docs/testing.md#rules: AWS answering is
// something no process here can do). One local HTTP endpoint answers three services, told apart
// by the service in each request's SigV4 credential scope, exactly as far as the terraform-runner
// and Terraform's S3 backend use them:
//
//   - S3: github.com/johannesboyne/gofakes3 with its in-memory backend (buckets, versioned
//     objects, conditional PutObject with If-None-Match, which Terraform's use_lockfile needs),
//     plus what gofakes3 lacks and the runner uses: CreateBucket's location rules and
//     BucketAlreadyOwnedByYou, GetBucketLocation, default encryption and public access blocks.
//   - SSM: GetParameter and PutParameter (JSON 1.1 protocol), and a hook that plays a
//     vanilla_kubeadm control-plane node publishing its admin.conf.
//   - STS: GetCallerIdentity (also as a presigned GET answered in JSON: how an EKS cluster checks
//     a token) and AssumeRole (query protocol) with roles' trust policies (principals, the
//     sts:ExternalId condition), recording every AssumeRole.
//
// Every request must be signed with SigV4 by a key the endpoint issued (a user's long-term key,
// or an AssumeRole session's key with its session token), in its Authorization header or as a
// presigned URL's query; the signature is verified as AWS does ("Create a signed AWS API
// request", IAM User Guide), so a client holding a wrong secret fails as it would against AWS. Each request is recorded (service, operation, access key), so a
// test can tell which identity made which call.
//
// Anything else is refused with the service's NotImplemented-style error rather than answered
// wrongly. Clients, Terraform's S3 backend included, reach the endpoint through
// AWS_ENDPOINT_URL alone (Endpoint.Env says why that is enough).
package awsfake
