package sim

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// STS plays AWS Security Token Service (API reference:
// https://docs.aws.amazon.com/STS/latest/APIReference/), query protocol: an
// Action=<Operation>&Version=2011-06-15&... request, POSTed as a form or as a GET's query ("IAM
// and AWS STS support GET and POST requests for all actions", IAM User Guide, "Calling the IAM
// API using HTTP query requests"), XML answers, errors as
// <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>.
//
//   - GetCallerIdentity (API_GetCallerIdentity.html): the caller's Account (the account of the
//     user or of the assumed role, as its ARN names it), Arn and UserId (a user, or
//     arn:aws:sts::<account>:assumed-role/<role>/<session> for a session). Asked with
//     "Accept: application/json", as the EKS authenticator replays a token's presigned URL
//     (aws-iam-authenticator pkg/token/token.go, Verify), the same answer comes as JSON:
//     {"GetCallerIdentityResponse":{"GetCallerIdentityResult":{...},"ResponseMetadata":{...}}}.
//   - AssumeRole (API_AssumeRole.html): temporary credentials (ASIA... key, secret, session
//     token, Expiration) for a role added with AddRole or AddRoleTrusting, when its trust policy
//     allows the caller: the caller is one of its principals (any principal of the account when
//     none are named, as a trust policy naming arn:aws:iam::<account>:root does) and, when the
//     policy has the condition sts:ExternalId, the request's ExternalId equals it. Otherwise 403
//     AccessDenied, "User: <caller> is not authorized to perform: sts:AssumeRole on resource:
//     <role>" (the error AssumeRole's "Errors" and the IAM User Guide's "Troubleshooting IAM
//     roles" show; STS does not say which condition failed). 400 ValidationError for a missing
//     RoleArn, a RoleSessionName outside [\w+=,.@-]{2,64}, an ExternalId outside 2 to 1224
//     characters of [\w+=,.@:/-], or DurationSeconds outside 900 to the role's maximum session
//     duration (one hour, also the cap for role chaining). Every call is recorded
//     (AssumeRoleCalls).
//
// Other actions are 400 InvalidAction. Authentication failures use the Common Errors
// (CommonErrors.html): MissingAuthenticationToken, IncompleteSignature, InvalidClientTokenId
// (unknown key or wrong session token), ExpiredToken, and SignatureDoesNotMatch.
type STS struct {
	e *AWS

	mu    sync.Mutex
	roles map[string]Trust // role ARN -> its trust policy
	calls []AssumeRoleCall
}

// Trust is a role's trust policy: Allow sts:AssumeRole to Principals, with the condition
// StringEquals sts:ExternalId = ExternalID when ExternalID is set (IAM User Guide, "Access to
// AWS accounts owned by third parties").
type Trust struct {
	// Principals are the ARNs of the users allowed to assume the role; none: every principal of
	// the account.
	Principals []string
	// ExternalID, when set, must be the request's ExternalId.
	ExternalID string
}

// AssumeRoleCall is one AssumeRole request.
type AssumeRoleCall struct {
	RoleARN, ExternalID, RoleSessionName string
	DurationSeconds                      int
	// CallerAccessKeyID signed the request.
	CallerAccessKeyID string
	// Issued are the credentials answered (empty when refused); Error the error code otherwise.
	Issued AWSCredentials
	Error  string
}

// maxSessionDuration is a role's default MaxSessionDuration (and the cap for role chaining).
const maxSessionDuration = 3600

var (
	roleARNRe     = regexp.MustCompile(`^arn:aws:iam::([0-9]{12}):role/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})$`)
	sessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	// externalIDRe is ExternalId's pattern; its length, 2 to 1224, is checked apart (Go's regexp
	// repeats at most 1000).
	externalIDRe = regexp.MustCompile(`^[\w+=,.@:/-]*$`)
)

func newSTS(e *AWS) *STS { return &STS{e: e, roles: map[string]Trust{}} }

// AddRole creates a role whose trust policy lets every principal of the account assume it, with
// condition sts:ExternalId = externalID when externalID is set. It returns the role's ARN.
func (s *STS) AddRole(name, externalID string) string {
	return s.AddRoleTrusting(name, Trust{ExternalID: externalID})
}

// AddRoleTrusting creates (or replaces) role name with trust policy trust and returns its ARN.
func (s *STS) AddRoleTrusting(name string, trust Trust) string {
	arn := fmt.Sprintf("arn:aws:iam::%s:role/%s", AWSAccountID, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[arn] = trust
	return arn
}

// AssumeRoleCalls returns the AssumeRole requests so far.
func (s *STS) AssumeRoleCalls() []AssumeRoleCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AssumeRoleCall(nil), s.calls...)
}

func (s *STS) operation(r *http.Request, body []byte) (string, string) {
	form, _ := stsForm(r, body)
	return form.Get("Action"), form.Get("RoleArn")
}

// stsForm is a query request's parameters: a GET's query, or a POST's form.
func stsForm(r *http.Request, body []byte) (url.Values, error) {
	if r.Method == http.MethodGet {
		return r.URL.Query(), nil
	}
	return url.ParseQuery(string(body))
}

func (s *STS) authError(w http.ResponseWriter, _ *http.Request, err *authError) {
	switch err.kind {
	case authMissing:
		s.fail(w, http.StatusForbidden, "MissingAuthenticationToken", err.message)
	case authMalformed:
		s.fail(w, http.StatusBadRequest, "IncompleteSignature", err.message)
	case authUnknownKey, authBadToken:
		s.fail(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
	case authExpired:
		s.fail(w, http.StatusBadRequest, "ExpiredToken", err.message)
	default:
		s.fail(w, http.StatusForbidden, "SignatureDoesNotMatch", err.message)
	}
}

func (s *STS) serve(w http.ResponseWriter, r *http.Request, body []byte, p *principal, _ string) {
	form, err := stsForm(r, body)
	if (r.Method != http.MethodPost && r.Method != http.MethodGet) || err != nil {
		s.fail(w, http.StatusBadRequest, "InvalidAction", "STS takes a GET query or a POSTed form")
		return
	}
	switch form.Get("Action") {
	case "GetCallerIdentity":
		type result struct {
			XMLName              xml.Name `xml:"GetCallerIdentityResult"`
			Arn, UserId, Account string   //nolint:revive // AWS's element names
		}
		res := result{Arn: p.arn, UserId: p.userID, Account: p.account()}
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			b, _ := json.Marshal(map[string]any{"GetCallerIdentityResponse": map[string]any{
				"GetCallerIdentityResult": map[string]string{"Arn": res.Arn, "UserId": res.UserId, "Account": res.Account},
				"ResponseMetadata":        map[string]string{"RequestId": requestID()},
			}})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		s.answer(w, "GetCallerIdentity", res)
	case "AssumeRole":
		s.assumeRole(w, form, p)
	default:
		s.fail(w, http.StatusBadRequest, "InvalidAction", "Could not find operation "+form.Get("Action")+" for version 2011-06-15")
	}
}

func (s *STS) assumeRole(w http.ResponseWriter, form url.Values, p *principal) {
	call := AssumeRoleCall{
		RoleARN:           form.Get("RoleArn"),
		ExternalID:        form.Get("ExternalId"),
		RoleSessionName:   form.Get("RoleSessionName"),
		DurationSeconds:   3600,
		CallerAccessKeyID: p.creds.AccessKeyID,
	}
	if d := form.Get("DurationSeconds"); d != "" {
		call.DurationSeconds, _ = strconv.Atoi(d)
	}
	fail := func(status int, code, message string) {
		call.Error = code
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		s.fail(w, status, code, message)
	}
	m := roleARNRe.FindStringSubmatch(call.RoleARN)
	switch {
	case m == nil:
		fail(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'roleArn' failed to satisfy constraint: Member must be a role ARN")
		return
	case !sessionNameRe.MatchString(call.RoleSessionName):
		fail(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*")
		return
	case form.Has("ExternalId") && (len(call.ExternalID) < 2 || len(call.ExternalID) > 1224 || !externalIDRe.MatchString(call.ExternalID)):
		fail(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'externalId' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@:\\/-]*")
		return
	case call.DurationSeconds < 900:
		fail(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 900")
		return
	case call.DurationSeconds > maxSessionDuration:
		fail(http.StatusBadRequest, "ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
		return
	}
	s.mu.Lock()
	trust, ok := s.roles[call.RoleARN]
	s.mu.Unlock()
	if !ok || (len(trust.Principals) > 0 && !slices.Contains(trust.Principals, p.arn)) || (trust.ExternalID != "" && trust.ExternalID != call.ExternalID) {
		fail(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: %s is not authorized to perform: sts:AssumeRole on resource: %s", p.arn, call.RoleARN))
		return
	}
	c := AWSCredentials{
		AccessKeyID:     "ASIA" + randomString(16, upperAlnum),
		SecretAccessKey: randomString(40, secretChars),
		SessionToken:    "FwoGZXIvYXdzE" + randomString(300, secretChars),
		Expires:         time.Now().Add(time.Duration(call.DurationSeconds) * time.Second).UTC().Truncate(time.Second),
	}
	roleID := "AROA" + randomString(17, upperAlnum)
	assumed := &principal{
		creds:  c,
		arn:    fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", m[1], m[2], call.RoleSessionName),
		userID: roleID + ":" + call.RoleSessionName,
	}
	call.Issued = c
	s.e.mu.Lock()
	s.e.principals[c.AccessKeyID] = assumed
	s.e.mu.Unlock()
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	type credentials struct {
		AccessKeyId, SecretAccessKey, SessionToken, Expiration string //nolint:revive // AWS's element names
	}
	type assumedRoleUser struct {
		Arn, AssumedRoleId string //nolint:revive // AWS's element names
	}
	s.answer(w, "AssumeRole", struct {
		XMLName         xml.Name `xml:"AssumeRoleResult"`
		Credentials     credentials
		AssumedRoleUser assumedRoleUser
	}{
		xml.Name{},
		credentials{c.AccessKeyID, c.SecretAccessKey, c.SessionToken, c.Expires.Format(time.RFC3339)},
		assumedRoleUser{assumed.arn, assumed.userID},
	})
}

// answer writes <Action>Response xmlns=...>result<ResponseMetadata/></...>; result is the
// <Action>Result> element (its XMLName says so).
func (s *STS) answer(w http.ResponseWriter, action string, result any) {
	type metadata struct {
		RequestID string `xml:"RequestId"`
	}
	writeXML(w, http.StatusOK, struct {
		XMLName          xml.Name
		Xmlns            string `xml:"xmlns,attr"`
		Result           any
		ResponseMetadata metadata
	}{xml.Name{Local: action + "Response"}, "https://sts.amazonaws.com/doc/2011-06-15/", result, metadata{requestID()}})
}

// fail answers a query-protocol error.
func (s *STS) fail(w http.ResponseWriter, status int, code, message string) {
	typ := "Sender"
	if status >= 500 {
		typ = "Receiver"
	}
	writeXML(w, status, struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Error   struct {
			Type, Code, Message string
		}
		RequestID string `xml:"RequestId"`
	}{
		Xmlns:     "https://sts.amazonaws.com/doc/2011-06-15/",
		Error:     struct{ Type, Code, Message string }{typ, code, message},
		RequestID: requestID(),
	})
}
