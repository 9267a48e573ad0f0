package netguard

import (
	"net/netip"
)

// Class is the kind of an address, as a refusal names it.
type Class string

// Classes of the built-in table (Classify).
const (
	// Public is every address no other class covers.
	Public Class = "public"
	// Loopback is 127.0.0.0/8 and ::1: the manager's own host.
	Loopback Class = "loopback"
	// LinkLocal is 169.254.0.0/16 and fe80::/10.
	LinkLocal Class = "link-local"
	// CloudMetadata is the link-local instance metadata and credential endpoints of the clouds the
	// backend may run on: 169.254.169.254 (EC2 IMDS, and the metadata service of GCP, Azure,
	// OpenStack and Open Telekom Cloud at the same address), fd00:ec2::254 (EC2 IMDS over IPv6),
	// 169.254.170.2 (ECS task credentials), 169.254.170.23 and fd00:ec2::23 (EKS Pod Identity
	// Agent, AWS EKS user guide "Set up the Amazon EKS Pod Identity Agent"). The IPv6 ones lie in
	// the unique local range, which is not denied by default: they are denied by this class.
	CloudMetadata Class = "link-local (cloud metadata)"
	// Unspecified is 0.0.0.0/8 ("this network": Linux connects 0.0.0.0 to the local host) and ::.
	Unspecified Class = "unspecified"
	// Multicast is 224.0.0.0/4 and ff00::/8.
	Multicast Class = "multicast"
	// Reserved is 240.0.0.0/4 (with the limited broadcast address 255.255.255.255).
	Reserved Class = "reserved"
	// Private is RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) and unique local IPv6
	// (fc00::/7). Not denied by default.
	Private Class = "private"
	// SharedAddress is 100.64.0.0/10 (RFC 6598, carrier-grade NAT; some clouds' pod networks).
	// Not denied by default.
	SharedAddress Class = "shared address space"
	// Documentation is 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 (RFC 5737,
	// RFC 3849): never routed. Not denied by default.
	Documentation Class = "documentation"
	// NotIP is a dial to something that is not an IP address and port (a Unix socket).
	NotIP Class = "not an IP address"
)

// Classes of the platform's own addresses and the admin's ranges (Rules given to a Guard).
const (
	// BackendServiceRange is the backend cluster's Service ClusterIP range.
	BackendServiceRange Class = "the backend's service range"
	// BackendPodRange is the backend cluster's Pod IP range.
	BackendPodRange Class = "the backend's pod range"
	// BackendAPIServer is an address of the backend cluster's API server.
	BackendAPIServer Class = "the backend's API server"
	// KCPShard is an address of kcp (a shard, or the front proxy the manager talks to).
	KCPShard Class = "a kcp shard"
	// AdminDenied is a range the platform admin denies (--target-deny-cidrs).
	AdminDenied Class = "a range denied by the platform admin"
)

// DefaultDeny are the built-in classes a Guard made with DefaultRules refuses.
var DefaultDeny = []Class{Loopback, LinkLocal, CloudMetadata, Unspecified, Multicast, Reserved}

// builtin is the classification table; the longest prefix containing an address decides.
var builtin = func() []Rule {
	table := []struct {
		prefix string
		class  Class
	}{
		{"0.0.0.0/8", Unspecified},
		{"10.0.0.0/8", Private},
		{"100.64.0.0/10", SharedAddress},
		{"127.0.0.0/8", Loopback},
		{"169.254.0.0/16", LinkLocal},
		{"169.254.169.254/32", CloudMetadata},
		{"169.254.170.2/32", CloudMetadata},
		{"169.254.170.23/32", CloudMetadata},
		{"172.16.0.0/12", Private},
		{"192.0.2.0/24", Documentation},
		{"192.168.0.0/16", Private},
		{"198.51.100.0/24", Documentation},
		{"203.0.113.0/24", Documentation},
		{"224.0.0.0/4", Multicast},
		{"240.0.0.0/4", Reserved},
		{"::/128", Unspecified},
		{"::1/128", Loopback},
		{"fe80::/10", LinkLocal},
		{"fc00::/7", Private},
		{"fd00:ec2::254/128", CloudMetadata},
		{"fd00:ec2::23/128", CloudMetadata},
		{"ff00::/8", Multicast},
		{"2001:db8::/32", Documentation},
	}
	rules := make([]Rule, 0, len(table))
	for _, e := range table {
		rules = append(rules, Rule{Prefix: netip.MustParsePrefix(e.prefix), Class: e.class})
	}
	return rules
}()

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a.b.c.d is translated to a.b.c.d by
// a NAT64 gateway, so it is checked as a.b.c.d too.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Classify returns the built-in class of addr: the most specific entry of the table containing
// it, Public when none does. An IPv4-mapped IPv6 address is classified as its IPv4 address, and a
// NAT64 address as the IPv4 address it embeds.
func Classify(addr netip.Addr) Class {
	addr = canonical(addr)
	if v4, ok := embeddedIPv4(addr); ok {
		addr = v4
	}
	if r, ok := longest(builtin, addr); ok {
		return r.Class
	}
	return Public
}

// DefaultRules returns the table's rules of the DefaultDeny classes: what a production Guard
// refuses before the platform's own addresses and the admin's ranges are added.
func DefaultRules() []Rule {
	var out []Rule
	for _, r := range builtin {
		for _, c := range DefaultDeny {
			if r.Class == c {
				out = append(out, r)
			}
		}
	}
	return out
}

// canonical strips a zone and unmaps an IPv4-mapped IPv6 address.
func canonical(addr netip.Addr) netip.Addr {
	return addr.WithZone("").Unmap()
}

// embeddedIPv4 returns the IPv4 address a NAT64 address embeds.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() || !nat64.Contains(addr) {
		return netip.Addr{}, false
	}
	b := addr.As16()
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
}

// longest returns the rule of rules with the longest prefix containing addr, ignoring rules
// limited to a port.
func longest(rules []Rule, addr netip.Addr) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range rules {
		if r.Port != 0 || !r.Prefix.Contains(addr) {
			continue
		}
		if !found || r.Prefix.Bits() > best.Prefix.Bits() {
			best, found = r, true
		}
	}
	return best, found
}
