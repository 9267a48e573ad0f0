package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// STS plays AWS Security Token Service (API reference:
// https://docs.aws.amazon.com/STS/latest/APIReference/), query protocol: POST / with a form
// Action=<Operation>&Version=2011-06-15&..., XML answers, errors as
// <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>.
//
//   - GetCallerIdentity (API_GetCallerIdentity.html): the caller's Account (the account of the
//     user or of the assumed role, as its ARN names it), Arn and UserId (a user, or
//     arn:aws:sts::<account>:assumed-role/<role>/<session> for a session).
//   - AssumeRole (API_AssumeRole.html): temporary credentials (ASIA... key, secret, session
//     token, Expiration) for a role added with AddRole, when the caller's ExternalId matches the
//     role's trust policy; otherwise 403 AccessDenied ("User: <caller> is not authorized to
//     perform: sts:AssumeRole on resource: <role>"). 400 ValidationError for a missing RoleArn,
//     a RoleSessionName outside [\w+=,.@-]{2,64}, or DurationSeconds outside 900 to the role's
//     maximum session duration (one hour, also the cap for role chaining). Every call is
//     recorded (AssumeRoleCalls).
//
// Other actions are 400 InvalidAction. Authentication failures use the Common Errors
// (CommonErrors.html): MissingAuthenticationToken, IncompleteSignature, InvalidClientTokenId
// (unknown key or wrong session token), ExpiredToken, and SignatureDoesNotMatch.
type STS struct {
	e *Endpoint

	mu    sync.Mutex
	roles map[string]string // role ARN -> required external id ("" when none)
	calls []AssumeRoleCall
}

// AssumeRoleCall is one AssumeRole request.
type AssumeRoleCall struct {
	RoleARN, ExternalID, RoleSessionName string
	DurationSeconds                      int
	// CallerAccessKeyID signed the request.
	CallerAccessKeyID string
	// Issued are the credentials answered (empty when refused); Error the error code otherwise.
	Issued Credentials
	Error  string
}

// maxSessionDuration is a role's default MaxSessionDuration (and the cap for role chaining).
const maxSessionDuration = 3600

var (
	roleARNRe     = regexp.MustCompile(`^arn:aws:iam::([0-9]{12}):role/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})$`)
	sessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
)

func newSTS(e *Endpoint) *STS { return &STS{e: e, roles: map[string]string{}} }

// AddRole creates a role whose trust policy lets every principal of the account assume it, with
// condition sts:ExternalId = externalID when externalID is set. It returns the role's ARN.
func (s *STS) AddRole(name, externalID string) string {
	arn := fmt.Sprintf("arn:aws:iam::%s:role/%s", AccountID, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[arn] = externalID
	return arn
}

// AssumeRoleCalls returns the AssumeRole requests so far.
func (s *STS) AssumeRoleCalls() []AssumeRoleCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AssumeRoleCall(nil), s.calls...)
}

func (s *STS) operation(_ *http.Request, body []byte) (string, string) {
	form, _ := url.ParseQuery(string(body))
	return form.Get("Action"), form.Get("RoleArn")
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
	form, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil {
		s.fail(w, http.StatusBadRequest, "InvalidAction", "STS takes a POSTed form")
		return
	}
	switch form.Get("Action") {
	case "GetCallerIdentity":
		type result struct {
			XMLName              xml.Name `xml:"GetCallerIdentityResult"`
			Arn, UserId, Account string   //nolint:revive // AWS's element names
		}
		s.answer(w, "GetCallerIdentity", result{Arn: p.arn, UserId: p.userID, Account: p.account()})
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
	case call.DurationSeconds < 900:
		fail(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 900")
		return
	case call.DurationSeconds > maxSessionDuration:
		fail(http.StatusBadRequest, "ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
		return
	}
	s.mu.Lock()
	want, ok := s.roles[call.RoleARN]
	s.mu.Unlock()
	if !ok || want != call.ExternalID {
		fail(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: %s is not authorized to perform: sts:AssumeRole on resource: %s", p.arn, call.RoleARN))
		return
	}
	c := Credentials{
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
