package otc

// Credentials: this file reads Open Telekom Cloud (OTC) provider credentials from a tenant's
// Secret, checks their shape, and renders them as the credentials Secret of the Crossplane OTC
// provider. Secret values never appear in errors, in String/GoString/Format output, in JSON of
// the struct, or in slog output.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Credential modes.
const (
	// ModePassword authenticates with user_name, password and domain_name, scoped to a project
	// (tenant_name).
	ModePassword = "password"
	// ModeAKSK authenticates with an access key / secret key pair.
	ModeAKSK = "aksk"
)

// Limits on the input.
const (
	// MaxSize is the largest credentials document accepted (a real one is a few hundred bytes).
	MaxSize = 16 << 10
	// MaxValueLen is the longest value accepted for any key.
	MaxValueLen = 1024
)

// ProviderSecretKey is the key of the normalized credentials in the Secret the Crossplane OTC
// provider's ProviderConfig references (its examples use secretRef.key "credentials").
const ProviderSecretKey = "credentials"

// ErrInvalidCredentials is wrapped by every error ParseCredentials returns: the credentials
// cannot be used as they are, and retrying will not help until the Secret changes.
var ErrInvalidCredentials = errors.New("invalid OTC credentials")

// The keys of both forms. The key=value form and the JSON form use the same names.
const (
	keyAuthURL     = "auth_url"
	keyUserName    = "user_name"
	keyPassword    = "password"
	keyDomainName  = "domain_name"
	keyTenantName  = "tenant_name"
	keyProjectName = "project_name"
	keyRegion      = "region"
	keyAccessKey   = "access_key"
	keySecretKey   = "secret_key"
)

var (
	// passwordOnlyKeys mark the password form, akskOnlyKeys the AK/SK form.
	passwordOnlyKeys = []string{keyUserName, keyPassword}
	akskOnlyKeys     = []string{keyAccessKey, keySecretKey}
	// knownKeys are all keys accepted; anything else is refused (no provider options such as
	// insecure or cacert_file are passed through from a tenant).
	knownKeys = map[string]bool{
		keyAuthURL: true, keyUserName: true, keyPassword: true, keyDomainName: true,
		keyTenantName: true, keyProjectName: true, keyRegion: true, keyAccessKey: true, keySecretKey: true,
	}
	// secretKeys hold values that are never echoed, not even in a "must be" hint.
	secretKeys = map[string]bool{keyPassword: true, keySecretKey: true, keyAccessKey: true, keyUserName: true}

	// keyName is what a key must look like to be named in an error; anything else might be a
	// value pasted in the wrong place.
	keyName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// regionName is an OTC region such as eu-de, eu-nl or eu-ch2.
	regionName = regexp.MustCompile(`^[a-z]{2}-[a-z]{2,10}[0-9]{0,2}$`)
)

// Credentials are parsed OTC provider credentials. The exported fields are non-secret facts a
// controller may show in status or logs; the secret fields are unexported and redacted by
// String, GoString, Format and LogValue.
type Credentials struct {
	// Mode is ModePassword or ModeAKSK.
	Mode string
	// AuthURL is the IAM endpoint (auth_url), always https.
	AuthURL string
	// Region is the OTC region: the region key, or else (password form) the part of the project
	// name before the first '_' (OTC project names are <region> or <region>_<name>). Empty when
	// neither says it.
	Region string
	// Domain is the OTC domain (domain_name); empty in AK/SK form unless given.
	Domain string
	// Tenant is the OTC project (tenant_name, or its synonym project_name); empty in AK/SK form
	// unless given.
	Tenant string

	userName  string
	password  string
	accessKey string
	secretKey string
}

// ParseCredentials parses raw in either of the seed's forms and checks its shape:
//   - key=value lines (blank lines and lines starting with '#' are ignored), e.g.
//     auth_url=https://iam.eu-de.otc.t-systems.com/v3, user_name=..., password=...,
//     domain_name=..., tenant_name=eu-de; optional region and project_name (a synonym of
//     tenant_name);
//   - a flat JSON object of strings, e.g. {"access_key", "secret_key", "auth_url", "region"} with
//     optional tenant_name/project_name and domain_name.
//
// The mode follows from the keys, not the syntax: user_name/password make the password form,
// access_key/secret_key the AK/SK form, both together are refused. Keys outside those listed are
// refused. Errors name the key and the problem, never a value.
func ParseCredentials(raw []byte) (Credentials, error) {
	if len(raw) > MaxSize {
		return Credentials{}, invalid("the credentials are %d bytes, more than the limit of %d", len(raw), MaxSize)
	}
	if !utf8.Valid(raw) {
		return Credentials{}, invalid("the credentials are not valid UTF-8 text")
	}
	text := bytes.TrimPrefix(raw, []byte("\ufeff"))
	trimmed := bytes.TrimSpace(text)
	var (
		kv  map[string]string
		err error
	)
	switch {
	case len(trimmed) == 0:
		return Credentials{}, invalid("the credentials are empty")
	case trimmed[0] == '{':
		kv, err = parseJSON(trimmed)
	case looksLikeKeyValue(text):
		kv, err = parseKeyValue(text)
	default:
		return Credentials{}, invalid("unknown format: expected key=value lines (auth_url=..., user_name=..., ...) or a JSON object ({\"access_key\": ..., ...})")
	}
	if err != nil {
		return Credentials{}, err
	}
	return fromKeys(kv)
}

// looksLikeKeyValue reports whether the first meaningful line is key=value.
func looksLikeKeyValue(text []byte) bool {
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		return ok && keyName.MatchString(strings.TrimSpace(k))
	}
	return false
}

func parseKeyValue(text []byte) (map[string]string, error) {
	kv := map[string]string{}
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimRight(line, "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, invalid("line %d is not key=value", i+1)
		}
		k = strings.TrimSpace(k)
		if err := checkKey(k, fmt.Sprintf("line %d", i+1)); err != nil {
			return nil, err
		}
		if _, dup := kv[k]; dup {
			return nil, invalid("key %s appears more than once", k)
		}
		kv[k] = strings.Trim(v, " \t")
	}
	return kv, nil
}

// parseJSON reads a flat JSON object whose values are all strings, refusing duplicate keys and
// trailing data. encoding/json's own errors may quote the input, so they are not wrapped.
func parseJSON(text []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	syntaxErr := func() error {
		return invalid("the JSON form is not a valid JSON object (near byte %d)", dec.InputOffset())
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, syntaxErr()
	}
	kv := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr()
		}
		k, ok := tok.(string)
		if !ok {
			return nil, syntaxErr()
		}
		if err := checkKey(k, fmt.Sprintf("a JSON key near byte %d", dec.InputOffset())); err != nil {
			return nil, err
		}
		if _, dup := kv[k]; dup {
			return nil, invalid("key %s appears more than once", k)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, syntaxErr()
		}
		switch v := tok.(type) {
		case string:
			kv[k] = v
		case json.Delim:
			return nil, invalid("the value of key %s must be a string, not an object or array", k)
		default:
			return nil, invalid("the value of key %s must be a string", k)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, syntaxErr()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("the JSON form has data after the closing brace")
	}
	return kv, nil
}

// checkKey refuses an unknown key; it names the key only when it looks like a key name.
func checkKey(k, where string) error {
	if knownKeys[k] {
		return nil
	}
	allowed := make([]string, 0, len(knownKeys))
	for name := range knownKeys {
		allowed = append(allowed, name)
	}
	sort.Strings(allowed)
	if keyName.MatchString(k) {
		return invalid("unknown key %s (allowed: %s)", k, strings.Join(allowed, ", "))
	}
	return invalid("%s is not a known key (allowed: %s)", where, strings.Join(allowed, ", "))
}

func fromKeys(kv map[string]string) (Credentials, error) {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kv[k]
		switch {
		case strings.TrimSpace(v) == "":
			return Credentials{}, invalid("empty value of key %s", k)
		case len(v) > MaxValueLen:
			return Credentials{}, invalid("the value of key %s is longer than %d bytes", k, MaxValueLen)
		case strings.IndexFunc(v, unicode.IsControl) >= 0:
			return Credentials{}, invalid("the value of key %s contains control characters", k)
		}
	}
	hasPassword, hasAKSK := anyOf(kv, passwordOnlyKeys), anyOf(kv, akskOnlyKeys)
	var c Credentials
	switch {
	case hasPassword && hasAKSK:
		return Credentials{}, invalid("both forms mixed: %s belong to the password form, %s to the AK/SK form; use one",
			strings.Join(present(kv, passwordOnlyKeys), ", "), strings.Join(present(kv, akskOnlyKeys), ", "))
	case hasPassword:
		c.Mode = ModePassword
		if err := require(kv, keyAuthURL, keyUserName, keyPassword, keyDomainName); err != nil {
			return Credentials{}, err
		}
	case hasAKSK:
		c.Mode = ModeAKSK
		if err := require(kv, keyAccessKey, keySecretKey, keyAuthURL, keyRegion); err != nil {
			return Credentials{}, err
		}
	default:
		return Credentials{}, invalid("unknown format: neither user_name/password (password form) nor access_key/secret_key (AK/SK form) is set")
	}

	authURL, err := checkAuthURL(kv[keyAuthURL])
	if err != nil {
		return Credentials{}, err
	}
	c.AuthURL = authURL
	c.Domain = kv[keyDomainName]
	c.userName, c.password = kv[keyUserName], kv[keyPassword]
	c.accessKey, c.secretKey = kv[keyAccessKey], kv[keySecretKey]

	tenant, project := kv[keyTenantName], kv[keyProjectName]
	switch {
	case tenant != "" && project != "" && tenant != project:
		return Credentials{}, invalid("tenant_name and project_name are both set and differ; set one")
	case tenant != "":
		c.Tenant = tenant
	default:
		c.Tenant = project
	}
	if c.Mode == ModePassword && c.Tenant == "" {
		return Credentials{}, invalid("missing key tenant_name (or project_name): the password form needs the project to scope to")
	}
	if c.Tenant != "" && strings.ContainsAny(c.Tenant, " \t/") {
		return Credentials{}, invalid("tenant_name must be an OTC project name without spaces or slashes")
	}

	c.Region = kv[keyRegion]
	if c.Region == "" {
		if r, _, _ := strings.Cut(c.Tenant, "_"); regionName.MatchString(r) {
			c.Region = r
		}
	}
	if c.Region != "" && !regionName.MatchString(c.Region) {
		return Credentials{}, invalid("region must be an OTC region name such as eu-de or eu-nl")
	}
	if kv[keyRegion] != "" && c.Tenant != "" {
		if r, _, _ := strings.Cut(c.Tenant, "_"); regionName.MatchString(r) && r != c.Region {
			return Credentials{}, invalid("region does not match the region prefix of tenant_name")
		}
	}
	return c, nil
}

func checkAuthURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", invalid("auth_url is not a URL")
	case u.User != nil:
		return "", invalid("auth_url must not carry user information")
	case u.Scheme != "https":
		return "", invalid("auth_url is not https")
	case u.Host == "" || u.Hostname() == "":
		return "", invalid("auth_url has no host")
	case u.RawQuery != "" || u.Fragment != "":
		return "", invalid("auth_url must not have a query or fragment")
	}
	return u.String(), nil
}

func anyOf(kv map[string]string, keys []string) bool {
	return len(present(kv, keys)) > 0
}

func present(kv map[string]string, keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := kv[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func require(kv map[string]string, keys ...string) error {
	for _, k := range keys {
		if _, ok := kv[k]; !ok {
			return invalid("missing key %s", k)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidCredentials, fmt.Sprintf(format, args...))
}

// ProviderSecretData renders the credentials as the JSON document provider-opentelekomcloud reads
// from its ProviderConfig's credentials Secret (key ProviderSecretKey): a flat object of strings,
// unmarshalled into map[string]string and copied key by key into the Terraform provider
// configuration (access_key, secret_key, auth_url, region, user_name, tenant_name, password,
// domain_name, ...). See
// github.com/opentelekomcloud/provider-opentelekomcloud internal/clients/opentelekomcloud.go
// (TerraformSetupBuilder) and examples/namespaced/providerconfig/secret.yaml.tmpl at commit
// d711db8cf9730d4faf355ec690ede78eeb181969. Every value must be a JSON string (the provider's
// json.Unmarshal into map[string]string fails otherwise); empty facts are left out.
func (c Credentials) ProviderSecretData() ([]byte, error) {
	m := map[string]string{keyAuthURL: c.AuthURL}
	switch c.Mode {
	case ModePassword:
		m[keyUserName], m[keyPassword] = c.userName, c.password
	case ModeAKSK:
		m[keyAccessKey], m[keySecretKey] = c.accessKey, c.secretKey
	default:
		return nil, fmt.Errorf("%w: the credentials were not parsed (mode %q)", ErrInvalidCredentials, c.Mode)
	}
	for k, v := range map[string]string{keyDomainName: c.Domain, keyTenantName: c.Tenant, keyRegion: c.Region} {
		if v != "" {
			m[k] = v
		}
	}
	for k, v := range m {
		if v == "" {
			return nil, fmt.Errorf("%w: %s is empty", ErrInvalidCredentials, k)
		}
	}
	// encoding/json writes map keys sorted, so the same credentials give the same bytes and a
	// copy to the backend is a no-op when nothing changed.
	return json.Marshal(m)
}

// String describes the credentials with their secrets redacted.
func (c Credentials) String() string {
	return fmt.Sprintf("otc.Credentials{Mode:%q, AuthURL:%q, Region:%q, Domain:%q, Tenant:%q, secrets:<redacted>}",
		c.Mode, c.AuthURL, c.Region, c.Domain, c.Tenant)
}

// GoString is String: %#v never prints secrets.
func (c Credentials) GoString() string { return c.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, ...), so no verb reaches the
// unexported secret fields.
func (c Credentials) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = fmt.Fprintf(f, "%q", c.String())
		return
	}
	_, _ = io.WriteString(f, c.String())
}

// LogValue makes slog print the non-secret facts only.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("mode", c.Mode), slog.String("authURL", c.AuthURL), slog.String("region", c.Region),
		slog.String("domain", c.Domain), slog.String("tenant", c.Tenant))
}

// MarshalJSON writes the non-secret facts only (the unexported fields are not written by
// encoding/json anyway; this keeps it so if fields are ever exported).
func (c Credentials) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mode    string `json:"mode"`
		AuthURL string `json:"authURL"`
		Region  string `json:"region,omitempty"`
		Domain  string `json:"domain,omitempty"`
		Tenant  string `json:"tenant,omitempty"`
	}{c.Mode, c.AuthURL, c.Region, c.Domain, c.Tenant})
}

// DefaultAuthHosts are the IAM endpoints the platform lets credentials name by default: Open
// Telekom Cloud's public regions (iam.eu-de.otc.t-systems.com, iam.eu-nl.otc.t-systems.com) and
// its Swiss cloud (iam-pub.eu-ch2.sc.otc.t-systems.com).
var DefaultAuthHosts = []string{"*.otc.t-systems.com"}

// AuthHostAllowed reports whether the host of authURL (checked well-formed by ParseCredentials)
// matches one of patterns: "*" matches any host; "*.example.com" matches every name under
// example.com at any depth (not example.com itself); anything else matches that host exactly.
// Hosts compare case-insensitively. The provider's Crossplane controller connects to auth_url
// from the backend's network, so an admin limits it to the cloud's own endpoints.
func AuthHostAllowed(authURL string, patterns []string) bool {
	u, err := url.Parse(authURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		switch {
		case p == "*":
			return true
		case strings.HasPrefix(p, "*."):
			if strings.HasSuffix(host, p[1:]) && len(host) > len(p)-1 {
				return true
			}
		case p != "" && host == p:
			return true
		}
	}
	return false
}
