package netguard

import (
	"net/netip"
	"testing"
)

// TestClassify classifies addresses as a pure function: nothing here is dialed.
func TestClassify(t *testing.T) {
	tests := map[string]struct {
		addr string
		want Class
	}{
		"EC2 IMDS":                          {"169.254.169.254", CloudMetadata},
		"EC2 IMDS over IPv6":                {"fd00:ec2::254", CloudMetadata},
		"ECS task credentials":              {"169.254.170.2", CloudMetadata},
		"EKS Pod Identity Agent":            {"169.254.170.23", CloudMetadata},
		"EKS Pod Identity Agent over IPv6":  {"fd00:ec2::23", CloudMetadata},
		"IMDS mapped into IPv6":             {"::ffff:169.254.169.254", CloudMetadata},
		"IMDS through NAT64":                {"64:ff9b::a9fe:a9fe", CloudMetadata},
		"other link-local":                  {"169.254.1.1", LinkLocal},
		"IPv6 link-local":                   {"fe80::1", LinkLocal},
		"IPv6 link-local with a zone":       {"fe80::1%eth0", LinkLocal},
		"loopback":                          {"127.0.0.1", Loopback},
		"loopback alias":                    {"127.0.0.2", Loopback},
		"end of loopback":                   {"127.255.255.254", Loopback},
		"IPv6 loopback":                     {"::1", Loopback},
		"loopback mapped into IPv6":         {"::ffff:127.0.0.1", Loopback},
		"loopback through NAT64":            {"64:ff9b::7f00:1", Loopback},
		"unspecified":                       {"0.0.0.0", Unspecified},
		"this network":                      {"0.1.2.3", Unspecified},
		"IPv6 unspecified":                  {"::", Unspecified},
		"multicast":                         {"224.0.0.1", Multicast},
		"IPv6 multicast":                    {"ff02::1", Multicast},
		"reserved":                          {"240.0.0.1", Reserved},
		"limited broadcast":                 {"255.255.255.255", Reserved},
		"RFC 1918 10/8":                     {"10.0.0.1", Private},
		"RFC 1918 172.16/12":                {"172.31.255.1", Private},
		"just past 172.16/12":               {"172.32.0.1", Public},
		"RFC 1918 192.168/16":               {"192.168.1.10", Private},
		"unique local IPv6":                 {"fd12:3456::1", Private},
		"shared address space":              {"100.64.0.1", SharedAddress},
		"end of shared address space":       {"100.127.255.254", SharedAddress},
		"just past shared address space":    {"100.128.0.1", Public},
		"TEST-NET-1":                        {"192.0.2.2", Documentation},
		"TEST-NET-3":                        {"203.0.113.7", Documentation},
		"IPv6 documentation":                {"2001:db8::1", Documentation},
		"public IPv4":                       {"8.8.8.8", Public},
		"public IPv4 mapped into IPv6":      {"::ffff:1.1.1.1", Public},
		"public IPv6":                       {"2a00:1450:4001:80b::200e", Public},
		"public IPv4 through NAT64":         {"64:ff9b::808:808", Public},
		"a public address next to metadata": {"169.253.255.255", Public},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Classify(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("Classify(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

// TestCheck decides addresses with the default rules, the platform's own addresses and the
// admin's ranges and exceptions, as a pure function: nothing here is dialed.
func TestCheck(t *testing.T) {
	g := New(
		[]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:127.0.0.3/128")},
		append(DefaultRules(),
			Rule{Prefix: netip.MustParsePrefix("10.96.0.0/12"), Class: BackendServiceRange},
			Rule{Prefix: netip.MustParsePrefix("100.64.0.0/16"), Class: BackendPodRange},
			Rule{Prefix: netip.MustParsePrefix("203.0.113.0/24"), Class: AdminDenied},
			Rule{Prefix: netip.MustParsePrefix("::ffff:198.51.100.0/120"), Class: AdminDenied},
		)...)
	// The platform's own endpoints, as URLRules makes them.
	g.SetPlatform("kcp", []Rule{
		{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 6443, Class: KCPShard},
		{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Class: KCPShard},
		{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Port: 6443, Class: KCPShard},
		{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Class: KCPShard},
	})
	g.SetPlatform("backend", []Rule{{Prefix: netip.MustParsePrefix("10.96.0.1/32"), Port: 443, Class: BackendAPIServer}})

	tests := map[string]struct {
		addr string
		want Class // "" allowed
	}{
		"metadata":                                     {"169.254.169.254:80", CloudMetadata},
		"metadata over IPv6":                           {"[fd00:ec2::254]:80", CloudMetadata},
		"metadata mapped into IPv6":                    {"[::ffff:169.254.169.254]:80", CloudMetadata},
		"metadata through NAT64":                       {"[64:ff9b::a9fe:a9fe]:80", CloudMetadata},
		"loopback alias":                               {"127.0.0.2:443", Loopback},
		"allowed loopback address":                     {"127.0.0.1:8443", ""},
		"allowed loopback address, mapped":             {"[::ffff:127.0.0.1]:8443", ""},
		"allowed loopback address, through NAT64":      {"[64:ff9b::7f00:1]:8443", ""},
		"kcp's endpoint despite the exception":         {"127.0.0.1:6443", KCPShard},
		"kcp's endpoint mapped":                        {"[::ffff:127.0.0.1]:6443", KCPShard},
		"IPv6 loopback":                                {"[::1]:443", Loopback},
		"unspecified":                                  {"0.0.0.0:443", Unspecified},
		"service range inside an allowed private /8":   {"10.100.0.5:443", BackendServiceRange},
		"backend API server's endpoint":                {"10.96.0.1:443", BackendAPIServer},
		"backend API server's address, another port":   {"10.96.0.1:10250", BackendServiceRange},
		"kcp shard's host inside an allowed /8":        {"10.1.2.3:2379", KCPShard},
		"private address outside the backend's ranges": {"10.200.0.1:6443", ""},
		"private address not denied by default":        {"192.168.1.1:6443", ""},
		"pod range":                                    {"100.64.3.4:443", BackendPodRange},
		"shared address space outside the pod range":   {"100.65.0.1:443", ""},
		"admin-denied range":                           {"203.0.113.9:443", AdminDenied},
		"admin-denied range given mapped":              {"198.51.100.9:443", AdminDenied},
		"public":                                       {"8.8.8.8:443", ""},
		"public IPv6":                                  {"[2a00:1450:4001:80b::200e]:443", ""},
		"exception given mapped applies to IPv4":       {"127.0.0.3:443", ""},
		"link-local, no exception":                     {"169.254.10.10:443", LinkLocal},
		"multicast":                                    {"[ff02::1]:443", Multicast},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := g.Check(netip.MustParseAddrPort(tt.addr))
			f, forbidden := AsForbidden(err)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check(%s) = %v, want allowed", tt.addr, err)
			case tt.want != "" && !forbidden:
				t.Errorf("Check(%s) = %v, want forbidden (%s)", tt.addr, err, tt.want)
			case tt.want != "" && f.Class != tt.want:
				t.Errorf("Check(%s) refused as %q, want %q", tt.addr, f.Class, tt.want)
			}
		})
	}

	// A source's rules are replaced as a whole, and removed by an empty set.
	g.SetPlatform("kcp", nil)
	if err := g.Check(netip.MustParseAddrPort("127.0.0.1:6443")); err != nil {
		t.Errorf("after the kcp rules were removed, 127.0.0.1:6443 = %v, want allowed", err)
	}
	if err := g.Check(netip.MustParseAddrPort("10.96.0.1:443")); err == nil {
		t.Error("removing the kcp rules removed the backend's too")
	}
}

// TestForbiddenErrorNamesNoAddress: the refusal names the class only.
func TestForbiddenErrorNamesNoAddress(t *testing.T) {
	g := New(nil, DefaultRules()...)
	err := g.Check(netip.MustParseAddrPort("169.254.169.254:80"))
	if err == nil {
		t.Fatal("metadata allowed")
	}
	if got, want := err.Error(), "refused to connect to a forbidden address (link-local (cloud metadata))"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("--target-allow-cidrs", []string{"127.0.0.1", " 10.1.2.3/8", "::1", "::ffff:10.0.0.0/104", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.0.0.0/8", "::1/128", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("ParsePrefixes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParsePrefixes[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	if _, err := ParsePrefixes("--target-deny-cidrs", []string{"10.0.0.0/33"}); err == nil || err.Error() != `--target-deny-cidrs: "10.0.0.0/33" is neither a CIDR nor an IP address` {
		t.Errorf("bad CIDR: error %v", err)
	}
}
