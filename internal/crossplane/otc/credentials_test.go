package otc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Values the tests treat as secret: no error and no printed form may contain them.
const (
	secretUser     = "Svc-User-7Q9"
	secretPassword = "S3cret!Passw0rd#x"
	secretAK       = "AKIDEXAMPLE7Q9XZ"
	secretSK       = "SK+Example/SecretKey9"
)

var secrets = []string{secretUser, secretPassword, secretAK, secretSK}

const passwordForm = `auth_url=https://iam.eu-de.otc.t-systems.com/v3
user_name=` + secretUser + `
password=` + secretPassword + `
domain_name=OTC-EU-DE-000000000010000
tenant_name=eu-de
`

const akskForm = `{
  "access_key": "` + secretAK + `",
  "secret_key": "` + secretSK + `",
  "auth_url": "https://iam.eu-de.otc.t-systems.com/v3",
  "region": "eu-de"
}`

func TestParseCredentials(t *testing.T) {
	tests := map[string]struct {
		raw      string
		want     Credentials
		wantData map[string]string
		wantErr  string
	}{
		"password form from the seed": {
			raw: passwordForm,
			want: Credentials{Mode: ModePassword, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-de",
				Domain: "OTC-EU-DE-000000000010000", Tenant: "eu-de", userName: secretUser, password: secretPassword},
			wantData: map[string]string{"auth_url": "https://iam.eu-de.otc.t-systems.com/v3", "user_name": secretUser,
				"password": secretPassword, "domain_name": "OTC-EU-DE-000000000010000", "tenant_name": "eu-de", "region": "eu-de"},
		},
		"password form with comments, CRLF, spaces, a sub-project and an explicit region": {
			raw: "# OTC\r\n\r\n auth_url = https://iam.eu-de.otc.t-systems.com/v3\r\nuser_name=" + secretUser + "\r\npassword=" + secretPassword +
				"\r\ndomain_name=OTC-EU-DE-1\r\nproject_name=eu-de_dev\r\nregion=eu-de\r\n",
			want: Credentials{Mode: ModePassword, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-de",
				Domain: "OTC-EU-DE-1", Tenant: "eu-de_dev", userName: secretUser, password: secretPassword},
		},
		"password form whose value holds '='": {
			raw: strings.Replace(passwordForm, "password="+secretPassword, "password=a=b"+secretPassword, 1),
			want: Credentials{Mode: ModePassword, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-de",
				Domain: "OTC-EU-DE-000000000010000", Tenant: "eu-de", userName: secretUser, password: "a=b" + secretPassword},
		},
		"password form as JSON (the provider's own example)": {
			raw: `{"auth_url":"https://iam.eu-de.otc.t-systems.com/v3","user_name":"` + secretUser + `","password":"` + secretPassword +
				`","domain_name":"OTCxxx","tenant_name":"eu-de_project"}`,
			want: Credentials{Mode: ModePassword, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-de",
				Domain: "OTCxxx", Tenant: "eu-de_project", userName: secretUser, password: secretPassword},
		},
		"AK/SK form from the seed": {
			raw: akskForm,
			want: Credentials{Mode: ModeAKSK, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-de",
				accessKey: secretAK, secretKey: secretSK},
			wantData: map[string]string{"access_key": secretAK, "secret_key": secretSK,
				"auth_url": "https://iam.eu-de.otc.t-systems.com/v3", "region": "eu-de"},
		},
		"AK/SK form with project_name (demo-secret-create's OTC_PROJECT_NAME)": {
			raw: "\ufeff" + strings.Replace(akskForm, `"region": "eu-de"`, `"region": "eu-nl", "project_name": "eu-nl_demo"`, 1),
			want: Credentials{Mode: ModeAKSK, AuthURL: "https://iam.eu-de.otc.t-systems.com/v3", Region: "eu-nl",
				Tenant: "eu-nl_demo", accessKey: secretAK, secretKey: secretSK},
			wantData: map[string]string{"access_key": secretAK, "secret_key": secretSK,
				"auth_url": "https://iam.eu-de.otc.t-systems.com/v3", "region": "eu-nl", "tenant_name": "eu-nl_demo"},
		},
		"AK/SK form as key=value lines": {
			raw: "access_key=" + secretAK + "\nsecret_key=" + secretSK + "\nauth_url=https://iam.eu-ch2.sc.otc.t-systems.com/v3\nregion=eu-ch2\ntenant_name=eu-ch2\n",
			want: Credentials{Mode: ModeAKSK, AuthURL: "https://iam.eu-ch2.sc.otc.t-systems.com/v3", Region: "eu-ch2",
				Tenant: "eu-ch2", accessKey: secretAK, secretKey: secretSK},
		},

		"empty":                    {raw: " \n\t", wantErr: "the credentials are empty"},
		"too large":                {raw: passwordForm + "#" + strings.Repeat("x", MaxSize), wantErr: "more than the limit of 16384"},
		"not UTF-8":                {raw: passwordForm + "#\xff", wantErr: "not valid UTF-8"},
		"neither form":             {raw: secretPassword + "\n" + secretUser, wantErr: "unknown format: expected key=value lines"},
		"YAML instead":             {raw: "auth_url: https://x\npassword: " + secretPassword, wantErr: "unknown format"},
		"no mode keys":             {raw: "auth_url=https://iam.eu-de.otc.t-systems.com/v3\nregion=eu-de\n", wantErr: "unknown format: neither user_name/password"},
		"both forms mixed":         {raw: passwordForm + "access_key=" + secretAK + "\nsecret_key=" + secretSK + "\n", wantErr: "both forms mixed: user_name, password belong to the password form, access_key, secret_key to the AK/SK form"},
		"both forms mixed in JSON": {raw: strings.Replace(akskForm, `"region"`, `"password": "`+secretPassword+`", "region"`, 1), wantErr: "both forms mixed"},
		"missing password":         {raw: strings.Replace(passwordForm, "password="+secretPassword+"\n", "", 1), wantErr: "missing key password"},
		"missing auth_url":         {raw: strings.Replace(passwordForm, "auth_url=https://iam.eu-de.otc.t-systems.com/v3\n", "", 1), wantErr: "missing key auth_url"},
		"missing domain_name":      {raw: strings.Replace(passwordForm, "domain_name=OTC-EU-DE-000000000010000\n", "", 1), wantErr: "missing key domain_name"},
		"missing tenant_name":      {raw: strings.Replace(passwordForm, "tenant_name=eu-de\n", "", 1), wantErr: "missing key tenant_name (or project_name)"},
		"missing secret_key":       {raw: strings.Replace(akskForm, `"secret_key": "`+secretSK+`",`, "", 1), wantErr: "missing key secret_key"},
		"missing region in AK/SK": {raw: strings.Replace(akskForm, `,
  "region": "eu-de"`, "", 1), wantErr: "missing key region"},
		"empty password":            {raw: strings.Replace(passwordForm, "password="+secretPassword, "password=  ", 1), wantErr: "empty value of key password"},
		"empty secret_key":          {raw: strings.Replace(akskForm, secretSK, "", 1), wantErr: "empty value of key secret_key"},
		"auth_url not https":        {raw: strings.Replace(passwordForm, "https://", "http://", 1), wantErr: "auth_url is not https"},
		"auth_url without host":     {raw: strings.Replace(passwordForm, "https://iam.eu-de.otc.t-systems.com/v3", "https:///v3", 1), wantErr: "auth_url has no host"},
		"auth_url with user info":   {raw: strings.Replace(passwordForm, "https://", "https://"+secretUser+":"+secretAK+"@", 1), wantErr: "auth_url must not carry user information"},
		"auth_url not a URL":        {raw: strings.Replace(passwordForm, "https://iam.eu-de.otc.t-systems.com/v3", "https://%zz"+secretPassword, 1), wantErr: "auth_url is not a URL"},
		"auth_url with query":       {raw: strings.Replace(passwordForm, "/v3", "/v3?token="+secretPassword, 1), wantErr: "auth_url must not have a query"},
		"unknown key":               {raw: passwordForm + "insecure=true\n", wantErr: "unknown key insecure (allowed: access_key, auth_url,"},
		"secret pasted as a key":    {raw: passwordForm + secretPassword + "=x\n", wantErr: "line 6 is not a known key"},
		"secret pasted as a line":   {raw: passwordForm + secretPassword + "\n", wantErr: "line 6 is not key=value"},
		"duplicate key":             {raw: passwordForm + "password=" + secretPassword + "2\n", wantErr: "key password appears more than once"},
		"duplicate JSON key":        {raw: strings.Replace(akskForm, `"region"`, `"secret_key": "`+secretSK+`", "region"`, 1), wantErr: "key secret_key appears more than once"},
		"JSON number":               {raw: strings.Replace(akskForm, `"eu-de"`, `42`, 1), wantErr: "the value of key region must be a string"},
		"JSON object value":         {raw: strings.Replace(akskForm, `"`+secretSK+`"`, `{"v":"`+secretSK+`"}`, 1), wantErr: "value of key secret_key must be a string, not an object"},
		"JSON syntax error":         {raw: strings.Replace(akskForm, `",`, `"`, 1), wantErr: "the JSON form is not a valid JSON object (near byte"},
		"JSON unterminated string":  {raw: `{"secret_key": "` + secretSK, wantErr: "not a valid JSON object"},
		"JSON array":                {raw: `[{"secret_key": "` + secretSK + `"}]`, wantErr: "unknown format"},
		"JSON trailing data":        {raw: akskForm + `{"password":"` + secretPassword + `"}`, wantErr: "data after the closing brace"},
		"control character":         {raw: strings.Replace(akskForm, secretSK, secretSK+`\u0007`, 1), wantErr: "value of key secret_key contains control characters"},
		"value too long":            {raw: strings.Replace(akskForm, secretSK, secretSK+strings.Repeat("x", MaxValueLen), 1), wantErr: "value of key secret_key is longer than 1024 bytes"},
		"bad region":                {raw: strings.Replace(akskForm, `"eu-de"`, `"Europe/Berlin"`, 1), wantErr: "region must be an OTC region name"},
		"region against tenant":     {raw: passwordForm + "region=eu-nl\n", wantErr: "region does not match the region prefix of tenant_name"},
		"tenant and project differ": {raw: passwordForm + "project_name=eu-nl\n", wantErr: "tenant_name and project_name are both set and differ"},
		"tenant with a space":       {raw: strings.Replace(passwordForm, "tenant_name=eu-de", "tenant_name=eu de", 1), wantErr: "tenant_name must be an OTC project name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCredentials([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("want error %q, got %v", tc.wantErr, got)
				}
				if !errors.Is(err, ErrInvalidCredentials) {
					t.Errorf("error %q does not wrap ErrInvalidCredentials", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
				assertNoSecret(t, "error", err.Error())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Credentials{})); diff != "" {
				t.Errorf("credentials (-want +got):\n%s", diff)
			}
			data, err := got.ProviderSecretData()
			if err != nil {
				t.Fatal(err)
			}
			// The provider unmarshals the Secret into map[string]string.
			var m map[string]string
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("provider secret data is not a JSON object of strings: %v", err)
			}
			if tc.wantData != nil {
				if diff := cmp.Diff(tc.wantData, m); diff != "" {
					t.Errorf("provider secret data (-want +got):\n%s", diff)
				}
			}
			again, err := got.ProviderSecretData()
			if err != nil || !bytes.Equal(data, again) {
				t.Errorf("provider secret data is not stable: %s vs %s (%v)", data, again, err)
			}
		})
	}
}

func TestProviderSecretDataOfUnparsedCredentials(t *testing.T) {
	_, err := Credentials{AuthURL: "https://iam.eu-de.otc.t-systems.com/v3"}.ProviderSecretData()
	if !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("want ErrInvalidCredentials, got %v", err)
	}
}

// TestCredentialsNeverPrintSecrets prints parsed credentials every way a controller might.
func TestCredentialsNeverPrintSecrets(t *testing.T) {
	for _, raw := range []string{passwordForm, akskForm} {
		c, err := ParseCredentials([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T %v"} {
			assertNoSecret(t, verb, fmt.Sprintf(verb, c))
			assertNoSecret(t, verb+" of a pointer", fmt.Sprintf(verb, &c))
			assertNoSecret(t, verb+" in a struct", fmt.Sprintf(verb, struct{ C Credentials }{c}))
			assertNoSecret(t, verb+" in a slice", fmt.Sprintf(verb, []Credentials{c}))
		}
		assertNoSecret(t, "String", c.String())
		assertNoSecret(t, "GoString", c.GoString())
		js, err := json.Marshal(struct{ C Credentials }{c})
		if err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, "JSON", string(js))
		if !strings.Contains(string(js), `"authURL":"https://iam.eu-de.otc.t-systems.com/v3"`) {
			t.Errorf("JSON lost the non-secret facts: %s", js)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("Credentials", "credentials", c)
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("Credentials", "credentials", c)
		assertNoSecret(t, "slog", buf.String())
		if !strings.Contains(c.String(), "eu-de") || !strings.Contains(c.String(), "<redacted>") {
			t.Errorf("String() = %s, want the facts and a redaction marker", c)
		}
	}
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range secrets {
		for _, form := range []string{secret, fmt.Sprintf("%q", secret), fmt.Sprintf("%x", secret)} {
			if strings.Contains(s, form) {
				t.Errorf("%s leaks a secret value: %s", what, s)
			}
		}
	}
}
