package sim

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// AWSAccountID is the AWS account AddUser's users and AddRole's roles belong to. AddUserInAccount
// adds users of other accounts (S3 keeps their buckets apart; SSM keeps one parameter store for
// all, as no test here needs two accounts' parameters).
const AWSAccountID = "123456789012"

// AWSCredentials are an access key the endpoint issued.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey string
	// SessionToken is set for an AssumeRole session's key.
	SessionToken string
	// Expires is when a session's key stops working (zero for a user's key).
	Expires time.Time
}

// principal is who an access key belongs to.
type principal struct {
	creds AWSCredentials
	// arn is the principal's ARN: arn:aws:iam::<account>:user/<name>, or
	// arn:aws:sts::<account>:assumed-role/<role>/<session> for a session.
	arn, userID string
}

// account is the principal's AWS account: the fifth field of its ARN
// (arn:partition:service:region:account-id:resource, "Identify AWS resources with Amazon
// Resource Names (ARNs)", IAM User Guide).
func (p *principal) account() string {
	parts := strings.SplitN(p.arn, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}

// AWSRequest is one request the endpoint answered.
type AWSRequest struct {
	// Service is s3, ssm or sts (the signing service); Operation the API operation, e.g.
	// PutObject, GetParameter, AssumeRole.
	Service, Operation string
	// AccessKeyID signed the request ("" when unsigned); Region is the signing region.
	AccessKeyID, Region string
	// Resource is the bucket[/key], the parameter name or the role ARN, when there is one.
	Resource string
	// Status is the HTTP status answered.
	Status int
}

// AWS is the local AWS endpoint.
type AWS struct {
	// URL is the endpoint, e.g. http://127.0.0.1:40123.
	URL string
	S3  *S3
	SSM *SSM
	STS *STS

	server *httptest.Server

	mu         sync.Mutex
	principals map[string]*principal
	requests   []AWSRequest
}

// StartAWS starts an endpoint for test t and stops it when t ends.
func StartAWS(t testing.TB) *AWS {
	t.Helper()
	e := NewAWS()
	t.Cleanup(e.Close)
	return e
}

// NewAWS starts an endpoint; Close stops it.
func NewAWS() *AWS {
	e := &AWS{principals: map[string]*principal{}}
	e.S3 = newS3(e)
	e.SSM = newSSM(e)
	e.STS = newSTS(e)
	e.server = httptest.NewServer(http.HandlerFunc(e.serve))
	e.URL = e.server.URL
	return e
}

// Close stops the endpoint and the SSM hooks.
func (e *AWS) Close() {
	e.SSM.stop()
	e.server.Close()
}

// Env points AWS clients at the endpoint: AWS_ENDPOINT_URL alone. aws-sdk-go-v2 clients (the
// runner's) take it as their base endpoint, and so does Terraform v1.11.4's S3 backend: it loads
// its AWS configuration with aws-sdk-go-base, whose config.LoadDefaultConfig reads
// AWS_ENDPOINT_URL, and builds its STS and S3 clients from it. Because the endpoint's host is an
// IP address, S3's endpoint rules address buckets path-style, so neither use_path_style nor any
// skip_* backend setting is needed (the backend validates the credentials with
// sts:GetCallerIdentity, which STS answers). The service variables must NOT be set:
// AWS_ENDPOINT_URL_S3 makes the backend use a legacy endpoint resolver that addresses buckets
// virtual-hosted ("<bucket>.127.0.0.1"), which only -backend-config=use_path_style=true undoes
// (internal/backend/remote-state/s3/backend.go, the s3.NewFromConfig options).
func (e *AWS) Env() map[string]string {
	return map[string]string{"AWS_ENDPOINT_URL": e.URL}
}

// AddUser creates IAM user name of account AWSAccountID with an access key (long-term, AKIA...)
// and returns the key.
func (e *AWS) AddUser(name string) AWSCredentials { return e.AddUserInAccount(AWSAccountID, name) }

// AddUserInAccount creates IAM user name of account (12 digits) with an access key and returns
// the key.
func (e *AWS) AddUserInAccount(account, name string) AWSCredentials {
	c := AWSCredentials{AccessKeyID: "AKIA" + randomString(16, upperAlnum), SecretAccessKey: randomString(40, secretChars)}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.principals[c.AccessKeyID] = &principal{
		creds:  c,
		arn:    fmt.Sprintf("arn:aws:iam::%s:user/%s", account, name),
		userID: "AIDA" + randomString(17, upperAlnum),
	}
	return c
}

// Requests returns the requests answered so far for service ("" for all), in order.
func (e *AWS) Requests(service string) []AWSRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []AWSRequest
	for _, r := range e.requests {
		if service == "" || r.Service == service {
			out = append(out, r)
		}
	}
	return out
}

func (e *AWS) record(r AWSRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, r)
}

// principal looks up the owner of access key id.
func (e *AWS) principal(id string) (*principal, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.principals[id]
	return p, ok
}

// serve authenticates a request and hands it to its service.
func (e *AWS) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	req := AWSRequest{}
	defer func() { req.Status = rec.status; e.record(req) }()

	sig, sigErr := parseAuthorization(r)
	service := sig.service
	if service == "" {
		service = guessService(r, body)
	}
	req.Service, req.AccessKeyID, req.Region = service, sig.accessKeyID, sig.region
	var h handler
	switch service {
	case "s3":
		h = e.S3
	case "ssm":
		h = e.SSM
	case "sts":
		h = e.STS
	default:
		http.Error(w, "sim.AWS answers s3, ssm and sts only, not "+service, http.StatusNotImplemented)
		return
	}
	req.Operation, req.Resource = h.operation(r, body)
	if sigErr != nil {
		h.authError(rec, r, sigErr)
		return
	}
	p, authErr := e.authenticate(r, body, sig)
	if authErr != nil {
		h.authError(rec, r, authErr)
		return
	}
	h.serve(rec, r, body, p, sig.region)
}

// handler is one service.
type handler interface {
	// operation names the request's operation and resource.
	operation(r *http.Request, body []byte) (op, resource string)
	// authError answers an authentication failure in the service's error format.
	authError(w http.ResponseWriter, r *http.Request, err *authError)
	serve(w http.ResponseWriter, r *http.Request, body []byte, p *principal, region string)
}

// guessService names the service of an unsigned request, to answer it in that service's format.
func guessService(r *http.Request, body []byte) string {
	switch {
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM."):
		return "ssm"
	case r.Method == http.MethodPost && r.URL.Path == "/" && bytes.Contains(body, []byte("Action=")):
		return "sts"
	}
	return "s3"
}

// recorder keeps the status a handler answered.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

const (
	upperAlnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

// randomString is n random characters of alphabet.
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// requestID is a request ID in AWS's UUID shape.
func requestID() string {
	b := randomString(32, "0123456789abcdef")
	return b[:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:]
}
