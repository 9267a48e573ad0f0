package sim

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3 plays Amazon S3 (API reference: https://docs.aws.amazon.com/AmazonS3/latest/API/). Object
// and versioning operations are gofakes3's (v1.2.0, in-memory backend), which implements
// conditional writes (PutObject If-None-Match: * answered 412 PreconditionFailed when the key
// exists, backend.go CheckPutConditions), what Terraform's S3 backend does with
// use_lockfile = true to take the <key>.tflock lock. The bucket operations the runner relies on
// and gofakes3 lacks or answers differently from S3 are played here:
//
//   - CreateBucket (API_CreateBucket.html): the LocationConstraint must name the signing region
//     outside us-east-1 (else 400 IllegalLocationConstraintException) and must be absent in
//     us-east-1 (else 400 InvalidLocationConstraint); creating a bucket the account already owns
//     is 409 BucketAlreadyOwnedByYou, except in us-east-1 where S3 answers 200 for legacy
//     compatibility; a bucket name another account owns is 409 BucketAlreadyExists in every
//     region (bucket names are global: "General purpose bucket naming rules").
//   - Ownership: a bucket belongs to the account of the key that created it. A request about a
//     bucket (every operation but CreateBucket and ListBuckets) carrying
//     x-amz-expected-bucket-owner with another account is refused 403 AccessDenied ("Verifying
//     bucket ownership with bucket owner condition", bucket-owner-condition.html: "If the
//     account ID that you provide does not match the actual owner of the bucket, the request
//     fails with the HTTP status code 403 Forbidden (access denied)"). A caller of another account
//     is refused 403 AccessDenied too, unless the owner let its account in (GrantAccount, which
//     plays the owner writing a bucket policy that allows that account every action: cross-
//     account access needs the resource's policy, "Policy evaluation logic", IAM User Guide).
//   - HeadBucket (API_HeadBucket.html): 200 with x-amz-bucket-region, or 404 without a body.
//   - GetBucketLocation (API_GetBucketLocation.html): the region, empty for us-east-1.
//   - PutBucketEncryption / GetBucketEncryption (API_PutBucketEncryption.html,
//     API_GetBucketEncryption.html): a new bucket has SSE-S3 (AES256), S3's default since
//     January 2023.
//   - PutPublicAccessBlock / GetPublicAccessBlock (API_PutPublicAccessBlock.html,
//     API_GetPublicAccessBlock.html): a new bucket blocks all public access, S3's default since
//     April 2023.
//
// Other bucket subresources (acl, policy, tagging, lifecycle, ...) are answered 501
// NotImplemented. Error codes are those of "Error responses" (ErrorResponses.html#ErrorCodeList).
type S3 struct {
	e       *AWS
	backend *s3mem.Backend
	fake    http.Handler

	mu      sync.Mutex
	buckets map[string]*Bucket
}

// Bucket is what S3 keeps about a bucket besides its objects.
type Bucket struct {
	// Region is where the bucket was created.
	Region string
	// Owner is the account that created it.
	Owner string
	// SharedWith are the other accounts the owner's bucket policy lets do anything (GrantAccount).
	SharedWith []string
	// Encryption is the default encryption.
	Encryption Encryption
	// PublicAccessBlock is the bucket's public access block.
	PublicAccessBlock PublicAccessBlock
}

// Encryption is a bucket's default encryption rule.
type Encryption struct {
	SSEAlgorithm, KMSMasterKeyID string
	BucketKeyEnabled             bool
}

// PublicAccessBlock is a bucket's public access block configuration.
type PublicAccessBlock struct {
	BlockPublicAcls       bool `xml:"BlockPublicAcls"`
	IgnorePublicAcls      bool `xml:"IgnorePublicAcls"`
	BlockPublicPolicy     bool `xml:"BlockPublicPolicy"`
	RestrictPublicBuckets bool `xml:"RestrictPublicBuckets"`
}

func newS3(e *AWS) *S3 {
	backend := s3mem.New()
	return &S3{e: e, backend: backend, fake: gofakes3.New(backend).Server(), buckets: map[string]*Bucket{}}
}

// Bucket returns bucket name's configuration.
func (s *S3) Bucket(name string) (Bucket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[name]
	if !ok {
		return Bucket{}, false
	}
	c := *b
	c.SharedWith = slices.Clone(b.SharedWith)
	return c, true
}

// GrantAccount plays the owner of bucket writing a bucket policy that allows account every
// action on the bucket and its objects (PutBucketPolicy itself is not implemented), as someone
// who took a bucket name another account will use might, to receive what it writes.
func (s *S3) GrantAccount(bucket, account string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket]
	if !ok {
		return fmt.Errorf("no bucket %s", bucket)
	}
	if !slices.Contains(b.SharedWith, account) {
		b.SharedWith = append(b.SharedWith, account)
	}
	return nil
}

// Versioning is bucket's versioning status: Enabled, Suspended or "" (never enabled).
func (s *S3) Versioning(bucket string) (string, error) {
	v, err := s.backend.VersioningConfiguration(bucket)
	if err != nil {
		return "", err
	}
	return string(v.Status), nil
}

// Object returns the current version of bucket/key.
func (s *S3) Object(bucket, key string) ([]byte, error) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = obj.Contents.Close() }()
	return io.ReadAll(obj.Contents)
}

// Keys lists the keys in bucket.
func (s *S3) Keys(bucket string) ([]string, error) {
	res, err := s.backend.ListBucket(bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, c := range res.Contents {
		keys = append(keys, c.Key)
	}
	return keys, nil
}

// unimplementedSubresources are bucket and object subresources S3 has and this fake does not.
var unimplementedSubresources = []string{
	"accelerate", "acl", "analytics", "attributes", "cors", "intelligent-tiering", "inventory",
	"legal-hold", "lifecycle", "logging", "metrics", "notification", "object-lock",
	"ownershipControls", "policy", "policyStatus", "replication", "requestPayment", "restore",
	"retention", "select", "tagging", "torrent", "website",
}

// split is a path-style request's bucket and key.
func split(r *http.Request) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, key
}

func (s *S3) operation(r *http.Request, _ []byte) (string, string) {
	bucket, key := split(r)
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	res := bucket
	if key != "" {
		res += "/" + key
	}
	m := r.Method
	switch {
	case bucket == "":
		return "ListBuckets", ""
	case key == "" && has("versioning"):
		return map[string]string{"PUT": "PutBucketVersioning", "GET": "GetBucketVersioning"}[m], res
	case key == "" && has("encryption"):
		return map[string]string{"PUT": "PutBucketEncryption", "GET": "GetBucketEncryption", "DELETE": "DeleteBucketEncryption"}[m], res
	case key == "" && has("publicAccessBlock"):
		return map[string]string{"PUT": "PutPublicAccessBlock", "GET": "GetPublicAccessBlock", "DELETE": "DeletePublicAccessBlock"}[m], res
	case key == "" && has("location"):
		return "GetBucketLocation", res
	case key == "" && has("versions"):
		return "ListObjectVersions", res
	case key == "" && has("uploads"):
		return "ListMultipartUploads", res
	case key == "" && has("delete"):
		return "DeleteObjects", res
	case key == "":
		switch m {
		case "PUT":
			return "CreateBucket", res
		case "HEAD":
			return "HeadBucket", res
		case "DELETE":
			return "DeleteBucket", res
		case "GET":
			if q.Get("list-type") == "2" {
				return "ListObjectsV2", res
			}
			return "ListObjects", res
		}
	case has("uploads"):
		return "CreateMultipartUpload", res
	case has("uploadId"):
		return map[string]string{"PUT": "UploadPart", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload", "GET": "ListParts"}[m], res
	case m == "PUT" && r.Header.Get("X-Amz-Copy-Source") != "":
		return "CopyObject", res
	default:
		return map[string]string{"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}[m], res
	}
	return m, res
}

func (s *S3) authError(w http.ResponseWriter, r *http.Request, err *authError) {
	switch err.kind {
	case authMissing:
		s.fail(w, r, http.StatusForbidden, "AccessDenied", "Access Denied")
	case authMalformed:
		s.fail(w, r, http.StatusBadRequest, "AuthorizationHeaderMalformed", err.message)
	case authUnknownKey:
		s.fail(w, r, http.StatusForbidden, "InvalidAccessKeyId", err.message)
	case authBadToken:
		s.fail(w, r, http.StatusBadRequest, "InvalidToken", "The provided token is malformed or otherwise invalid.")
	case authExpired:
		s.fail(w, r, http.StatusBadRequest, "ExpiredToken", "The provided token has expired.")
	default:
		s.fail(w, r, http.StatusForbidden, "SignatureDoesNotMatch", err.message)
	}
}

func (s *S3) serve(w http.ResponseWriter, r *http.Request, body []byte, p *principal, region string) {
	q := r.URL.Query()
	for _, sub := range unimplementedSubresources {
		if _, ok := q[sub]; ok {
			s.fail(w, r, http.StatusNotImplemented, "NotImplemented", "sim.AWS does not implement the "+sub+" subresource")
			return
		}
	}
	op, _ := s.operation(r, body)
	bucket, _ := split(r)
	if op != "CreateBucket" && op != "ListBuckets" && !s.allowed(bucket, p.account(), r.Header.Get("X-Amz-Expected-Bucket-Owner")) {
		s.fail(w, r, http.StatusForbidden, "AccessDenied", "Access Denied")
		return
	}
	switch op {
	case "CreateBucket":
		s.createBucket(w, r, bucket, body, region, p.account())
	case "HeadBucket":
		b, ok := s.Bucket(bucket)
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("X-Amz-Bucket-Region", b.Region)
		w.WriteHeader(http.StatusOK)
	case "GetBucketLocation":
		b, ok := s.Bucket(bucket)
		if !ok {
			s.noSuchBucket(w, r, bucket)
			return
		}
		loc := b.Region
		if loc == "us-east-1" {
			loc = ""
		}
		writeXML(w, http.StatusOK, struct {
			XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
			Value   string   `xml:",chardata"`
		}{Value: loc})
	case "PutBucketEncryption", "GetBucketEncryption":
		s.encryption(w, r, bucket, body, op == "PutBucketEncryption")
	case "PutPublicAccessBlock", "GetPublicAccessBlock":
		s.publicAccessBlock(w, r, bucket, body, op == "PutPublicAccessBlock")
	case "DeleteBucketEncryption", "DeletePublicAccessBlock":
		s.fail(w, r, http.StatusNotImplemented, "NotImplemented", "sim.AWS does not implement "+op)
	case "DeleteBucket":
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		s.fake.ServeHTTP(rec, r)
		if rec.status == http.StatusNoContent {
			s.mu.Lock()
			delete(s.buckets, bucket)
			s.mu.Unlock()
		}
	default:
		s.fake.ServeHTTP(w, r)
	}
}

// allowed says whether a caller of account may act on bucket, expecting expectedOwner (the
// x-amz-expected-bucket-owner header, "" when absent): always when the bucket does not exist
// (the operation answers that), else when the owner matches the expectation and the caller is
// the owner or was let in (GrantAccount).
func (s *S3) allowed(bucket, account, expectedOwner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket]
	switch {
	case !ok:
		return true
	case expectedOwner != "" && expectedOwner != b.Owner:
		return false
	}
	return account == b.Owner || slices.Contains(b.SharedWith, account)
}

// createBucket plays CreateBucket (API_CreateBucket.html) for a caller of account.
func (s *S3) createBucket(w http.ResponseWriter, r *http.Request, bucket string, body []byte, region, account string) {
	var conf struct {
		LocationConstraint string `xml:"LocationConstraint"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := xml.Unmarshal(body, &conf); err != nil {
			s.fail(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
			return
		}
	}
	lc := conf.LocationConstraint
	switch {
	case region == "us-east-1" && lc != "":
		s.fail(w, r, http.StatusBadRequest, "InvalidLocationConstraint", "The specified location-constraint is not valid")
		return
	case region != "us-east-1" && lc == "":
		s.fail(w, r, http.StatusBadRequest, "IllegalLocationConstraintException", "The unspecified location constraint is incompatible for the region specific endpoint this request was sent to.")
		return
	case region != "us-east-1" && lc != region:
		s.fail(w, r, http.StatusBadRequest, "IllegalLocationConstraintException", fmt.Sprintf("The %s location constraint is incompatible for the region specific endpoint this request was sent to.", lc))
		return
	}
	if err := gofakes3.ValidateBucketName(bucket); err != nil {
		s.fail(w, r, http.StatusBadRequest, "InvalidBucketName", "The specified bucket is not valid.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buckets[bucket]; ok {
		if b.Owner != account {
			s.fail(w, r, http.StatusConflict, "BucketAlreadyExists", "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
			return
		}
		if region == "us-east-1" {
			w.Header().Set("Location", "/"+bucket)
			w.WriteHeader(http.StatusOK)
			return
		}
		s.fail(w, r, http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
		return
	}
	if err := s.backend.CreateBucket(bucket); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.buckets[bucket] = &Bucket{
		Region:            region,
		Owner:             account,
		Encryption:        Encryption{SSEAlgorithm: "AES256"},
		PublicAccessBlock: PublicAccessBlock{true, true, true, true},
	}
	w.Header().Set("Location", "/"+bucket)
	w.WriteHeader(http.StatusOK)
}

// sseConfiguration is ServerSideEncryptionConfiguration
// (API_ServerSideEncryptionConfiguration.html) with its one rule.
type sseConfiguration struct {
	XMLName xml.Name  `xml:"ServerSideEncryptionConfiguration"`
	Xmlns   string    `xml:"xmlns,attr,omitempty"`
	Rules   []sseRule `xml:"Rule"`
}

type sseRule struct {
	Default          *sseDefault `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled bool        `xml:"BucketKeyEnabled"`
}

type sseDefault struct {
	SSEAlgorithm   string `xml:"SSEAlgorithm"`
	KMSMasterKeyID string `xml:"KMSMasterKeyID,omitempty"`
}

// encryption plays PutBucketEncryption and GetBucketEncryption.
func (s *S3) encryption(w http.ResponseWriter, r *http.Request, bucket string, body []byte, put bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket]
	if !ok {
		s.noSuchBucket(w, r, bucket)
		return
	}
	if !put {
		writeXML(w, http.StatusOK, sseConfiguration{
			Xmlns: "http://s3.amazonaws.com/doc/2006-03-01/",
			Rules: []sseRule{{
				Default:          &sseDefault{b.Encryption.SSEAlgorithm, b.Encryption.KMSMasterKeyID},
				BucketKeyEnabled: b.Encryption.BucketKeyEnabled,
			}},
		})
		return
	}
	var c sseConfiguration
	if err := xml.Unmarshal(body, &c); err != nil || len(c.Rules) != 1 || c.Rules[0].Default == nil ||
		!slices.Contains([]string{"AES256", "aws:kms", "aws:kms:dsse"}, c.Rules[0].Default.SSEAlgorithm) {
		s.fail(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
		return
	}
	b.Encryption = Encryption{c.Rules[0].Default.SSEAlgorithm, c.Rules[0].Default.KMSMasterKeyID, c.Rules[0].BucketKeyEnabled}
	w.WriteHeader(http.StatusOK)
}

// publicAccessBlock plays PutPublicAccessBlock and GetPublicAccessBlock.
func (s *S3) publicAccessBlock(w http.ResponseWriter, r *http.Request, bucket string, body []byte, put bool) {
	type config struct {
		XMLName xml.Name `xml:"PublicAccessBlockConfiguration"`
		Xmlns   string   `xml:"xmlns,attr,omitempty"`
		PublicAccessBlock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucket]
	if !ok {
		s.noSuchBucket(w, r, bucket)
		return
	}
	if !put {
		writeXML(w, http.StatusOK, config{Xmlns: "http://s3.amazonaws.com/doc/2006-03-01/", PublicAccessBlock: b.PublicAccessBlock})
		return
	}
	var c config
	if err := xml.Unmarshal(body, &c); err != nil {
		s.fail(w, r, http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
		return
	}
	b.PublicAccessBlock = c.PublicAccessBlock
	w.WriteHeader(http.StatusOK)
}

func (s *S3) noSuchBucket(w http.ResponseWriter, r *http.Request, bucket string) {
	s.fail(w, r, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
}

// fail answers an S3 error (ErrorResponses.html: <Error><Code/><Message/><RequestId/></Error>;
// a HEAD response has no body).
func (s *S3) fail(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	writeXML(w, status, struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string   `xml:"Code"`
		Message   string   `xml:"Message"`
		Resource  string   `xml:"Resource"`
		RequestID string   `xml:"RequestId"`
	}{Code: code, Message: message, Resource: r.URL.Path, RequestID: requestID()})
}

// writeXML answers v as an XML document.
func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(b)
}
