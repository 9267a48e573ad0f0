package otc

import "testing"

func TestAuthHostAllowed(t *testing.T) {
	for _, tc := range []struct {
		url      string
		patterns []string
		want     bool
	}{
		{"https://iam.eu-de.otc.t-systems.com/v3", DefaultAuthHosts, true},
		{"https://iam-pub.eu-ch2.sc.otc.t-systems.com/v3", DefaultAuthHosts, true},
		{"https://IAM.EU-NL.OTC.T-SYSTEMS.COM./v3", DefaultAuthHosts, true},
		{"https://otc.t-systems.com/v3", DefaultAuthHosts, false},
		{"https://evil-otc.t-systems.com.attacker.example/v3", DefaultAuthHosts, false},
		{"https://attackerotc.t-systems.com/v3", DefaultAuthHosts, false},
		{"https://169.254.169.254/latest", DefaultAuthHosts, false},
		{"https://kubernetes.default.svc/api", DefaultAuthHosts, false},
		{"https://iam.example/v3", []string{"iam.example"}, true},
		{"https://iam.example:8443/v3", []string{"iam.example"}, true},
		{"https://sub.iam.example/v3", []string{"iam.example"}, false},
		{"https://anything.example/v3", []string{"*"}, true},
		{"https://iam.eu-de.otc.t-systems.com/v3", nil, false},
	} {
		if got := AuthHostAllowed(tc.url, tc.patterns); got != tc.want {
			t.Errorf("AuthHostAllowed(%q, %v) = %t, want %t", tc.url, tc.patterns, got, tc.want)
		}
	}
}
