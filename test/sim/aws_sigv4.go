package sim

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// authError is why a request was not authenticated, as the services name it.
type authError struct {
	// kind is one of the auth* kinds; each service maps it to its own error code.
	kind    authKind
	message string
}

func (e *authError) Error() string { return e.message }

type authKind int

const (
	// authMissing: no SigV4 Authorization header.
	authMissing authKind = iota
	// authMalformed: an Authorization header that is not SigV4 as documented.
	authMalformed
	// authUnknownKey: an access key the endpoint never issued.
	authUnknownKey
	// authBadToken: a session key without its session token, or with another one.
	authBadToken
	// authExpired: a session key past its expiration.
	authExpired
	// authSignature: the signature does not match the request and the key's secret.
	authSignature
)

// sigV4 is a parsed SigV4 Authorization header:
// AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request,
// SignedHeaders=<h1;h2>, Signature=<hex>; or the same in a presigned URL's query parameters.
type sigV4 struct {
	accessKeyID, date, region, service string
	signedHeaders                      []string
	signature                          string
	// presigned: the signature is in the query ("Authenticating Requests: Using Query
	// Parameters"), with amzDate and securityToken (X-Amz-Date, X-Amz-Security-Token) there too.
	presigned              bool
	amzDate, securityToken string
}

// presignedLifetime is how long STS accepts a presigned URL after its X-Amz-Date, whatever its
// X-Amz-Expires says (aws-iam-authenticator pkg/token/token.go: "presigned STS urls are valid for
// 15 minutes after timestamp in x-amz-date", and X-Amz-Expires "IT IS IGNORED").
const presignedLifetime = 15 * time.Minute

// parseAuthorization parses r's Authorization header, or its presigned query parameters when it
// has none. It names the service even when it fails later, so the error is answered in that
// service's format.
func parseAuthorization(r *http.Request) (sigV4, *authError) {
	var s sigV4
	h := r.Header.Get("Authorization")
	if h == "" && r.URL.Query().Get("X-Amz-Algorithm") != "" {
		return parsePresigned(r)
	}
	if h == "" {
		return s, &authError{authMissing, "Request is missing Authentication Token"}
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return s, &authError{authMalformed, "Unsupported Authorization Type"}
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return s, &authError{authMalformed, "Credential should be scoped to a valid region and service"}
			}
			s.accessKeyID, s.date, s.region, s.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			s.signedHeaders = strings.Split(v, ";")
		case "Signature":
			s.signature = v
		}
	}
	if s.accessKeyID == "" || len(s.signedHeaders) == 0 || s.signature == "" {
		return s, &authError{authMalformed, "Authorization header requires Credential, SignedHeaders and Signature"}
	}
	return s, nil
}

// parsePresigned parses the SigV4 query parameters of a presigned URL (IAM User Guide, "Create a
// signed AWS API request", query string variant): X-Amz-Algorithm=AWS4-HMAC-SHA256,
// X-Amz-Credential=<key>/<date>/<region>/<service>/aws4_request, X-Amz-Date, X-Amz-SignedHeaders,
// X-Amz-Signature and, for a session's key, X-Amz-Security-Token. This is how an EKS token is
// replayed: the EKS API server's authenticator GETs the presigned sts:GetCallerIdentity URL.
func parsePresigned(r *http.Request) (sigV4, *authError) {
	q := r.URL.Query()
	s := sigV4{presigned: true, amzDate: q.Get("X-Amz-Date"), securityToken: q.Get("X-Amz-Security-Token"), signature: q.Get("X-Amz-Signature")}
	f := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(f) == 5 && f[4] == "aws4_request" {
		s.accessKeyID, s.date, s.region, s.service = f[0], f[1], f[2], f[3]
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return s, &authError{authMalformed, "Unsupported Authorization Type"}
	}
	if s.accessKeyID == "" {
		return s, &authError{authMalformed, "Credential should be scoped to a valid region and service"}
	}
	if sh := q.Get("X-Amz-SignedHeaders"); sh != "" {
		s.signedHeaders = strings.Split(sh, ";")
	}
	if len(s.signedHeaders) == 0 || s.signature == "" || s.amzDate == "" {
		return s, &authError{authMalformed, "Query-string authentication requires the X-Amz-Credential, X-Amz-Date, X-Amz-SignedHeaders and X-Amz-Signature parameters"}
	}
	return s, nil
}

// authenticate finds the principal of a signed request and verifies its session token and
// signature.
func (e *AWS) authenticate(r *http.Request, body []byte, s sigV4) (*principal, *authError) {
	p, ok := e.principal(s.accessKeyID)
	if !ok {
		return nil, &authError{authUnknownKey, "The AWS Access Key Id you provided does not exist in our records."}
	}
	token := r.Header.Get("X-Amz-Security-Token")
	if s.presigned {
		token = s.securityToken
	}
	if p.creds.SessionToken != "" {
		if subtle.ConstantTimeCompare([]byte(token), []byte(p.creds.SessionToken)) != 1 {
			return nil, &authError{authBadToken, "The security token included in the request is invalid."}
		}
		if time.Now().After(p.creds.Expires) {
			return nil, &authError{authExpired, "The security token included in the request is expired"}
		}
	}
	want, err := signature(r, body, s, p.creds.SecretAccessKey)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(s.signature)) != 1 {
		return nil, &authError{authSignature, "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	}
	if s.presigned {
		signed, _ := time.Parse("20060102T150405Z", s.amzDate)
		if now := time.Now().UTC(); now.After(signed.Add(presignedLifetime)) {
			return nil, &authError{authSignature, fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 15 min.)",
				s.amzDate, now.Add(-presignedLifetime).Format("20060102T150405Z"), now.Format("20060102T150405Z"))}
		}
	}
	return p, nil
}

// signature computes the SigV4 signature of r with secret, from the headers the client says it
// signed, as AWS does (IAM User Guide, "Create a signed AWS API request": canonical request,
// string to sign, signing key, signature). S3 signs the path as sent; other services encode it
// once more. The payload hash is x-amz-content-sha256 when sent (S3 always sends it, also for
// UNSIGNED-PAYLOAD and streaming uploads), else the body's SHA-256.
//
// A presigned URL carries the date in its query, and its canonical query is every parameter but
// X-Amz-Signature; its payload hash is the (empty) body's.
func signature(r *http.Request, body []byte, s sigV4, secret string) (string, *authError) {
	amzDate := r.Header.Get("X-Amz-Date")
	if s.presigned {
		amzDate = s.amzDate
	}
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || t.Format("20060102") != s.date {
		return "", &authError{authMalformed, "X-Amz-Date is missing or does not match the credential scope's date"}
	}
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	if s.service != "s3" {
		path = uriEncode(path, false)
	}
	var headers strings.Builder
	for _, h := range s.signedHeaders {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = r.Header.Get("Content-Length")
			if v == "" {
				v = strconv.FormatInt(r.ContentLength, 10)
			}
		default:
			vals := r.Header.Values(h)
			for i := range vals {
				vals[i] = strings.Join(strings.Fields(vals[i]), " ")
			}
			v = strings.Join(vals, ",")
		}
		headers.WriteString(h + ":" + v + "\n")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" || s.presigned {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	canonical := strings.Join([]string{r.Method, path, canonicalQuery(r, s.presigned), headers.String(), strings.Join(s.signedHeaders, ";"), payload}, "\n")
	scope := fmt.Sprintf("%s/%s/%s/aws4_request", s.date, s.region, s.service)
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), s.date)
	key = hmacSHA256(key, s.region)
	key = hmacSHA256(key, s.service)
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign)), nil
}

// canonicalQuery is the query with names and values URI-encoded, sorted by name then value;
// without X-Amz-Signature for a presigned URL.
func canonicalQuery(r *http.Request, presigned bool) string {
	var pairs [][2]string
	for k, vs := range r.URL.Query() {
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		for _, v := range vs {
			pairs = append(pairs, [2]string{uriEncode(k, true), uriEncode(v, true)})
		}
	}
	slices.SortFunc(pairs, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + "=" + p[1]
	}
	return strings.Join(out, "&")
}

// uriEncode encodes every byte but the unreserved characters (A-Z a-z 0-9 - _ . ~), and '/'
// unless encodeSlash.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
