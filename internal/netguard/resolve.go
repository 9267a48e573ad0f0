package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
)

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// URLRules returns the rules that keep tenants off the server of rawURL, one of the platform's
// own endpoints: for every address its host resolves to (a literal IP is not looked up), a rule
// of class on that address and port, which no exception lets through, and one on the whole
// address. The port is the URL's, or 443 for https and 80 for http.
func URLRules(ctx context.Context, r Resolver, rawURL string, class Class) ([]Rule, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("%q is not a URL with a host", rawURL)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		default:
			port = "443"
		}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("%q has no valid port", rawURL)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", u.Hostname()); err != nil {
			return nil, fmt.Errorf("failed to resolve %s: %w", u.Hostname(), err)
		}
	}
	var out []Rule
	for _, a := range addrs {
		a = canonical(a)
		host := netip.PrefixFrom(a, a.BitLen())
		out = append(out, Rule{Prefix: host, Port: uint16(p), Class: class}, Rule{Prefix: host, Class: class})
	}
	return out, nil
}
