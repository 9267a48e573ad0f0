package kcpversion

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for gitVersion, want := range map[string]struct {
		ok, vulnerable bool
		says           string
	}{
		"v1.35.1+kcp-v0.31.2":         {ok: true, vulnerable: true},
		"v1.35.1+kcp-v0.31.3":         {ok: true},
		"v1.36.0+kcp-v0.32.0":         {ok: true, vulnerable: true},
		"v1.36.0+kcp-v0.32.3":         {ok: true},
		"v1.36.0+kcp-v0.32.4-rc.1":    {ok: true},
		"v1.34.2+kcp-v0.30.0":         {says: "kcp v0.30.0 is not supported"},
		"v1.37.0+kcp-v0.33.0":         {says: "kcp v0.33.0 is not supported"},
		"v1.36.3":                     {says: `reports version "v1.36.3", which names no kcp release`},
		"v0.0.0-master+$Format:%H$":   {says: `reports version "v0.0.0-master+$Format:%H$"`},
		"v1.35.1+kcp-v0.0.0-1a2b3c4d": {says: "kcp v0.0.0-1a2b3c4d is not supported"},
		"":                            {says: `reports version ""`},
	} {
		info := Parse(gitVersion)
		err := Check(info)
		if (err == nil) != want.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", gitVersion, err, want.ok)
		}
		if err != nil && !strings.Contains(err.Error(), want.says) {
			t.Errorf("Check(%q) = %q, want it to say %q", gitVersion, err, want.says)
		}
		if err != nil && !strings.Contains(err.Error(), "v0.31 and v0.32") && info.KCP != nil {
			t.Errorf("Check(%q) = %q, want it to name the supported lines", gitVersion, err)
		}
		if got := Vulnerable(info); got != want.vulnerable {
			t.Errorf("Vulnerable(%q) = %v, want %v", gitVersion, got, want.vulnerable)
		}
	}
}
