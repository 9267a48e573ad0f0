// Package authapi creates a host cluster's initial super-admin account (docs/hostcluster.md#admin-bootstrap):
// authapi's internal /internal/bootstrap/super-admin endpoint is called on the target
// through the Kubernetes API's service-proxy subresource, with the INTERNAL_API_KEY of the
// authapi-secrets Secret read directly from the target.
//
// The seed names the endpoint, the Secret and the key, not where they live nor the wire format.
// This package defines them as defaults (DefaultOptions) the manager can override by flags:
//
//   - Namespace kubeopera, Service authapi, its port named http: the call goes to
//     /api/v1/namespaces/kubeopera/services/authapi:http/proxy/internal/bootstrap/super-admin.
//   - Secret authapi-secrets in that namespace, key INTERNAL_API_KEY, sent in the
//     X-Internal-Api-Key header.
//   - Request: POST, JSON {"email", "username", "password"}; any 2xx is success (authapi upserts
//     the account: 201 created, 200 updated).
//
// The endpoint is an upsert, so the caller must make sure it runs once per HostCluster: a second
// call with a fresh password changes the real account's password.
//
// Neither the password nor the key ever appears in an error. The request body is passed to
// client-go as a reader, which client-go does not log (it logs []byte bodies at -v=8); client-go's
// -v=9 transport debugging prints request headers other than Authorization, so the manager must
// not run at -v=9 against production targets.
package authapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Defaults of Options.
const (
	DefaultNamespace = "kubeopera"
	DefaultService   = "authapi"
	DefaultPort      = "http"
	DefaultSecret    = "authapi-secrets"
	DefaultSecretKey = "INTERNAL_API_KEY"
)

// BootstrapPath is authapi's endpoint, relative to the Service.
const BootstrapPath = "internal/bootstrap/super-admin"

// APIKeyHeader carries INTERNAL_API_KEY.
const APIKeyHeader = "X-Internal-Api-Key"

// maxMessage bounds how much of an answer is kept in an error.
const maxMessage = 512

// ErrNotInstalled is wrapped by the error of a target where authapi is not (yet) there: its
// Secret, the Secret's key, or its Service's endpoints are missing. Retrying later can succeed
// (Flux may still be installing the platform), so such errors are transient.
var ErrNotInstalled = errors.New("authapi is not installed on the target")

// ErrRefused is wrapped by the error of a 401 or 403 answer from authapi: it refused the key.
var ErrRefused = errors.New("authapi refused the internal API key")

// Options locate authapi on the target.
type Options struct {
	// Namespace of authapi's Service and Secret.
	Namespace string
	// Service is authapi's Service.
	Service string
	// Port is the name of the Service's HTTP port.
	Port string
	// Secret holds the internal API key.
	Secret string
	// SecretKey is the key of the internal API key in Secret.
	SecretKey string
}

// DefaultOptions returns kubeopera / authapi:http / authapi-secrets[INTERNAL_API_KEY].
func DefaultOptions() Options {
	return Options{
		Namespace: DefaultNamespace,
		Service:   DefaultService,
		Port:      DefaultPort,
		Secret:    DefaultSecret,
		SecretKey: DefaultSecretKey,
	}
}

// withDefaults fills empty fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&o.Namespace, d.Namespace}, {&o.Service, d.Service}, {&o.Port, d.Port}, {&o.Secret, d.Secret}, {&o.SecretKey, d.SecretKey},
	} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	return o
}

// Admin is the account to create.
type Admin struct {
	Email    string
	Username string
	Password string
}

// request is the body authapi receives.
type request struct {
	Email    string `json:"email"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// Error is a failed bootstrap.
type Error struct {
	// StatusCode is the HTTP status of the answer (the target's API server or authapi behind its
	// proxy); 0 when there was none.
	StatusCode int
	// Message says what went wrong, bounded, without the password or the key.
	Message string
	// Transient is true when retrying can succeed: authapi not installed yet, no answer, 5xx, 429.
	Transient bool
	// Err is the cause: ErrNotInstalled, ErrRefused, a client error, or nil.
	Err error
}

func (e *Error) Error() string { return "super-admin bootstrap: " + e.Message }

func (e *Error) Unwrap() error { return e.Err }

// Terminal reports whether retrying the bootstrap cannot succeed: authapi refused the request, or
// the target's kubeconfig may not read the Secret or use the proxy. The reconcile skeleton
// stalls the object then.
func (e *Error) Terminal() bool { return !e.Transient }

// IsTransient reports whether retrying the bootstrap can succeed. errors.Is(err, ErrNotInstalled)
// says when the reason is that the platform is not installed yet, a wait rather than a failure.
func IsTransient(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Transient
}

// Bootstrap creates (upserts) the super-admin account a on the target cs.
func Bootstrap(ctx context.Context, cs kubernetes.Interface, opts Options, a Admin) error {
	opts = opts.withDefaults()
	switch {
	case a.Email == "":
		return &Error{Message: "the admin email is empty"}
	case a.Username == "":
		return &Error{Message: "the admin username is empty"}
	case a.Password == "":
		return &Error{Message: "the admin password is empty"}
	}
	where := fmt.Sprintf("%s not found in namespace %s (is the platform installed?)", opts.Secret, opts.Namespace)
	secret, err := cs.CoreV1().Secrets(opts.Namespace).Get(ctx, opts.Secret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &Error{StatusCode: http.StatusNotFound, Message: where, Transient: true, Err: ErrNotInstalled}
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return &Error{StatusCode: statusOf(err), Message: fmt.Sprintf("the target's kubeconfig may not read Secret %s/%s: %v", opts.Namespace, opts.Secret, err), Err: err}
	case err != nil:
		return &Error{StatusCode: statusOf(err), Message: fmt.Sprintf("failed to read Secret %s/%s: %v", opts.Namespace, opts.Secret, err), Transient: true, Err: err}
	}
	key := strings.TrimSpace(string(secret.Data[opts.SecretKey]))
	if key == "" {
		return &Error{Message: fmt.Sprintf("%s in namespace %s has no %s yet (is the platform installed?)", opts.Secret, opts.Namespace, opts.SecretKey), Transient: true, Err: ErrNotInstalled}
	}
	redact := strings.NewReplacer(a.Password, "[redacted]", key, "[redacted]").Replace

	rc := cs.CoreV1().RESTClient()
	if r, ok := rc.(*rest.RESTClient); !ok || r == nil {
		return &Error{Message: "the clientset has no REST client to reach the service proxy"}
	}
	body, err := json.Marshal(request{Email: a.Email, Username: a.Username, Password: a.Password})
	if err != nil {
		return &Error{Message: "failed to encode the request"}
	}
	svc := fmt.Sprintf("%s/%s:%s", opts.Namespace, opts.Service, opts.Port)
	res := rc.Post().
		Namespace(opts.Namespace).
		Resource("services").
		Name(opts.Service+":"+opts.Port).
		SubResource("proxy").
		Suffix(BootstrapPath).
		SetHeader("Content-Type", "application/json").
		SetHeader("Accept", "application/json").
		SetHeader(APIKeyHeader, key).
		// A reader, not []byte: client-go logs []byte request bodies at -v=8.
		Body(bytes.NewReader(body)).
		Do(ctx)
	var code int
	res.StatusCode(&code)
	raw, err := res.Raw()
	if err == nil {
		return nil
	}
	if code == 0 {
		return &Error{Message: fmt.Sprintf("failed to reach Service %s through the target's API server: %s", svc, redact(err.Error())), Transient: true, Err: err}
	}
	return answerError(opts, code, raw, redact)
}

// answerError types a non-2xx answer of the proxy call. redact removes the secrets from text.
func answerError(opts Options, code int, raw []byte, redact func(string) string) *Error {
	svc := fmt.Sprintf("%s/%s:%s", opts.Namespace, opts.Service, opts.Port)
	// An answer of the API server itself is a metav1.Status; anything else is authapi's own,
	// passed through by the proxy.
	if st, ok := apiServerStatus(raw); ok {
		prefix := fmt.Sprintf("the target's API server answered HTTP %d for Service %s", code, svc)
		msg := prefix + ": " + bounded(redact(st.Message))
		switch {
		case code == http.StatusNotFound:
			// The proxy looks up the Endpoints named like the Service: either is missing.
			return &Error{StatusCode: code, Message: prefix + ", which has no Service or Endpoints yet (is the platform installed?): " + bounded(redact(st.Message)), Transient: true, Err: ErrNotInstalled}
		case code == http.StatusServiceUnavailable && strings.Contains(st.Message, "no endpoints available"):
			// No ready authapi Pod yet. Other 503s ("error trying to reach service": the Pod
			// does not answer) are transient below.
			return &Error{StatusCode: code, Message: msg, Transient: true, Err: ErrNotInstalled}
		case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
			return &Error{StatusCode: code, Message: msg, Transient: true}
		default:
			// 401/403: the target's kubeconfig may not use services/proxy; 400: a bad name.
			return &Error{StatusCode: code, Message: msg}
		}
	}
	msg := authapiMessage(raw)
	if msg != "" {
		msg = ": " + bounded(redact(msg))
	}
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &Error{StatusCode: code, Message: fmt.Sprintf("%s from %s (HTTP %d)%s", ErrRefused, opts.Secret, code, msg), Err: ErrRefused}
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return &Error{StatusCode: code, Message: fmt.Sprintf("authapi answered HTTP %d%s", code, msg), Transient: true}
	default:
		return &Error{StatusCode: code, Message: fmt.Sprintf("authapi refused the super-admin account (HTTP %d)%s", code, msg)}
	}
}

// apiServerStatus decodes raw as the metav1.Status the API server answers with.
func apiServerStatus(raw []byte) (metav1.Status, bool) {
	var st metav1.Status
	if err := json.Unmarshal(raw, &st); err != nil || st.Kind != "Status" || st.APIVersion != "v1" {
		return metav1.Status{}, false
	}
	return st, true
}

// authapiMessage reads {"error": ...} or {"message": ...}, else the answer's text.
func authapiMessage(raw []byte) string {
	var m struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &m); err == nil {
		if m.Error != "" {
			return m.Error
		}
		return m.Message
	}
	return string(raw)
}

// bounded collapses white space and cuts s to maxMessage bytes.
func bounded(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "..."
	}
	return s
}

// statusOf is the HTTP status of an API error, 0 for others.
func statusOf(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}

// passwordBytes is the randomness of a generated password: 24 bytes, 32 characters.
const passwordBytes = 24

// GeneratePassword returns a random password from crypto/rand: 32 characters of the URL-safe
// base64 alphabet (A-Z a-z 0-9 - _), 192 bits, with at least one upper-case letter, one
// lower-case letter and one digit so common password policies accept it.
func GeneratePassword() (string, error) {
	for {
		b := make([]byte, passwordBytes)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("failed to generate a password: %w", err)
		}
		p := base64.RawURLEncoding.EncodeToString(b)
		if strings.ContainsAny(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") &&
			strings.ContainsAny(p, "abcdefghijklmnopqrstuvwxyz") &&
			strings.ContainsAny(p, "0123456789") {
			return p, nil
		}
	}
}
