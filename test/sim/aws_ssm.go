package sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SSM plays AWS Systems Manager Parameter Store (API reference:
// https://docs.aws.amazon.com/systems-manager/latest/APIReference/), JSON 1.1 protocol: POST /
// with X-Amz-Target: AmazonSSM.<Operation>, errors as {"__type": code, "message": ...}.
//
//   - GetParameter (API_GetParameter.html): {"Parameter": {...}}; a SecureString's value is
//     plaintext only WithDecryption (otherwise an opaque ciphertext); 400 ParameterNotFound.
//   - PutParameter (API_PutParameter.html): {"Version", "Tier"}; 400 ParameterAlreadyExists
//     without Overwrite; 400 ValidationException for a missing name or value, or a new
//     parameter without a valid Type (String, StringList, SecureString).
//
// Other operations are 400 UnknownOperationException. Authentication failures are answered as
// SSM's JSON endpoint does: MissingAuthenticationTokenException, IncompleteSignatureException,
// UnrecognizedClientException (unknown key or wrong session token), ExpiredTokenException and
// InvalidSignatureException (the Common Errors page, CommonErrors.html, lists the same
// failures under their query-protocol names).
type SSM struct {
	e *AWS

	mu     sync.Mutex
	params map[string]*Parameter
	done   chan struct{}
	hooks  sync.WaitGroup
}

// Parameter is a stored parameter.
type Parameter struct {
	Name, Type, Value string
	Version           int64
	LastModified      time.Time
}

func newSSM(e *AWS) *SSM {
	return &SSM{e: e, params: map[string]*Parameter{}, done: make(chan struct{})}
}

// Put creates or overwrites parameter name as a client with ssm:PutParameter would, e.g. as
// Terraform's aws_ssm_parameter seeds the admin kubeconfig parameter "PENDING".
func (s *SSM) Put(name, typ, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(name, typ, value)
}

func (s *SSM) put(name, typ, value string) int64 {
	p, ok := s.params[name]
	if !ok {
		p = &Parameter{Name: name}
		s.params[name] = p
	}
	if typ != "" {
		p.Type = typ
	}
	p.Value, p.LastModified = value, time.Now()
	p.Version++
	return p.Version
}

// Get returns parameter name.
func (s *SSM) Get(name string) (Parameter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.params[name]
	if !ok {
		return Parameter{}, false
	}
	return *p, true
}

// PublishAdminKubeconfig plays the control-plane node of a vanilla_kubeadm cluster (docs/provisioner.md#kubeconfig-retrieval):
// once parameter name exists (Terraform creates it, seeded PENDING, before the node boots) the
// node runs kubeadm init, which takes after here, and then overwrites the parameter with its
// admin.conf, base64-encoded, as a SecureString. It returns at once; the node stops with the
// endpoint.
func (s *SSM) PublishAdminKubeconfig(name string, adminConf []byte, after time.Duration) {
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, ok := s.Get(name); ok {
				break
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
		select {
		case <-s.done:
			return
		case <-time.After(after):
		}
		s.Put(name, "SecureString", base64.StdEncoding.EncodeToString(adminConf))
	}()
}

func (s *SSM) stop() {
	close(s.done)
	s.hooks.Wait()
}

func (s *SSM) operation(r *http.Request, body []byte) (string, string) {
	var in struct{ Name string }
	_ = json.Unmarshal(body, &in)
	return strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM."), in.Name
}

func (s *SSM) authError(w http.ResponseWriter, _ *http.Request, err *authError) {
	code := map[authKind]string{
		authMissing:    "MissingAuthenticationTokenException",
		authMalformed:  "IncompleteSignatureException",
		authUnknownKey: "UnrecognizedClientException",
		authBadToken:   "UnrecognizedClientException",
		authExpired:    "ExpiredTokenException",
		authSignature:  "InvalidSignatureException",
	}[err.kind]
	message := err.message
	if err.kind == authUnknownKey {
		message = "The security token included in the request is invalid."
	}
	s.fail(w, code, message)
}

func (s *SSM) serve(w http.ResponseWriter, r *http.Request, body []byte, _ *principal, region string) {
	if r.Method != http.MethodPost {
		s.fail(w, "UnknownOperationException", "SSM takes POST requests")
		return
	}
	op, _ := s.operation(r, body)
	switch op {
	case "GetParameter":
		s.getParameter(w, body, region)
	case "PutParameter":
		s.putParameter(w, body)
	default:
		s.fail(w, "UnknownOperationException", "sim.AWS does not implement AmazonSSM."+op)
	}
}

func (s *SSM) getParameter(w http.ResponseWriter, body []byte, region string) {
	var in struct {
		Name           string
		WithDecryption bool
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
		s.fail(w, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
		return
	}
	p, ok := s.Get(in.Name)
	if !ok {
		s.fail(w, "ParameterNotFound", "")
		return
	}
	value := p.Value
	if p.Type == "SecureString" && !in.WithDecryption {
		value = base64.StdEncoding.EncodeToString([]byte("kms-ciphertext:" + p.Name + ":" + fmt.Sprint(p.Version)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"Parameter": map[string]any{
		"ARN":              fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", region, AWSAccountID, strings.TrimPrefix(p.Name, "/")),
		"DataType":         "text",
		"LastModifiedDate": float64(p.LastModified.UnixMilli()) / 1000,
		"Name":             p.Name,
		"Type":             p.Type,
		"Value":            value,
		"Version":          p.Version,
	}})
}

func (s *SSM) putParameter(w http.ResponseWriter, body []byte) {
	var in struct {
		Name, Value, Type string
		Overwrite         bool
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Name == "" || in.Value == "" {
		s.fail(w, "ValidationException", "1 validation error detected: Name and Value must not be null")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.params[in.Name]
	switch {
	case exists && !in.Overwrite:
		s.fail(w, "ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
		return
	case in.Type != "" && in.Type != "String" && in.Type != "StringList" && in.Type != "SecureString":
		s.fail(w, "ValidationException", "1 validation error detected: Value '"+in.Type+"' at 'type' failed to satisfy constraint: Member must satisfy enum value set: [SecureString, StringList, String]")
		return
	case !exists && in.Type == "":
		s.fail(w, "ValidationException", "A parameter type is required when you create a parameter.")
		return
	}
	v := s.put(in.Name, in.Type, in.Value)
	writeJSON(w, http.StatusOK, map[string]any{"Version": v, "Tier": "Standard"})
}

// fail answers a JSON 1.1 error: 400 with {"__type": code, "message": message}.
func (s *SSM) fail(w http.ResponseWriter, code, message string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"__type": code, "message": message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", requestID())
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
