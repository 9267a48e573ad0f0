package netguard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Rule denies the addresses of Prefix, on every port or, with Port set, on that port only.
type Rule struct {
	// Prefix holds the addresses the rule covers.
	Prefix netip.Prefix
	// Port limits the rule to one port: the platform's own endpoints (a kcp shard, the backend
	// API server), which no exception lets through. 0: every port.
	Port uint16
	// Class is what a refusal by this rule names.
	Class Class
}

// ForbiddenError is a connection the guard refused. It names the class of the address, never
// the address.
type ForbiddenError struct {
	// Class is the class of the refused address.
	Class Class
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("refused to connect to a forbidden address (%s)", e.Class)
}

// AsForbidden returns the *ForbiddenError in err's chain (through url.Error, net.OpError and
// every %w wrapping), if any.
func AsForbidden(err error) (*ForbiddenError, bool) {
	var f *ForbiddenError
	ok := errors.As(err, &f)
	return f, ok
}

// Guard decides which addresses may be dialed, and dials. Its static rules and exceptions are set
// once (New); the platform's own addresses are replaced by their sources while it is used
// (SetPlatform). A Guard is safe for concurrent use.
type Guard struct {
	// static are the rules New was given; allow the exceptions.
	static []Rule
	allow  []netip.Prefix
	// dialer dials with the Control hook.
	dialer *net.Dialer

	mu sync.RWMutex
	// platform holds the platform's own addresses by source (SetPlatform).
	platform map[string][]Rule
	// rules is static plus every source's rules, rebuilt by SetPlatform.
	rules []Rule
}

// New returns a Guard that refuses the addresses of rules except those of allow (see the package
// doc for which rule decides). DefaultRules are the built-in classes a production guard denies.
func New(allow []netip.Prefix, rules ...Rule) *Guard {
	g := &Guard{
		static:   normalizeRules(rules),
		allow:    normalizePrefixes(allow),
		platform: map[string][]Rule{},
	}
	g.rules = g.static
	g.dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

// SetPlatform replaces the rules of source (e.g. "kcp", "backend") with rules: the platform's own
// addresses as its source last found them. An empty rules removes the source's rules.
func (g *Guard) SetPlatform(source string, rules []Rule) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(rules) == 0 {
		delete(g.platform, source)
	} else {
		g.platform[source] = normalizeRules(rules)
	}
	all := slices.Clone(g.static)
	for _, s := range slices.Sorted(maps.Keys(g.platform)) {
		all = append(all, g.platform[s]...)
	}
	g.rules = all
}

// Check returns a *ForbiddenError when a connection to ap must not be made, nil when it may.
func (g *Guard) Check(ap netip.AddrPort) error {
	addr := canonical(ap.Addr())
	if !addr.IsValid() {
		return &ForbiddenError{Class: NotIP}
	}
	if err := g.check(addr, ap.Port()); err != nil {
		return err
	}
	if v4, ok := embeddedIPv4(addr); ok {
		return g.check(v4, ap.Port())
	}
	return nil
}

// check applies the rules to one canonical address: a rule with this port first, then the
// longest deny prefix against the longest exception.
func (g *Guard) check(addr netip.Addr, port uint16) error {
	g.mu.RLock()
	rules := g.rules
	g.mu.RUnlock()
	for _, r := range rules {
		if r.Port != 0 && r.Port == port && r.Prefix.Contains(addr) {
			return &ForbiddenError{Class: r.Class}
		}
	}
	deny, ok := longest(rules, addr)
	if !ok {
		return nil
	}
	for _, p := range g.allow {
		if p.Contains(addr) && p.Bits() >= deny.Prefix.Bits() {
			return nil
		}
	}
	return &ForbiddenError{Class: deny.Class}
}

// control is the net.Dialer's Control hook: address is the IP and port being connected to, after
// name resolution, before the connect system call.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &ForbiddenError{Class: NotIP}
	}
	return g.Check(ap)
}

// DialContext dials like net.Dialer.DialContext, every attempt checked by the guard: a refused
// one fails with a *ForbiddenError (wrapped in a *net.OpError) and sends nothing.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dialer.DialContext(ctx, network, address)
}

// Apply makes every connection of cfg go through the guard: its Dial is the guard's, and it uses
// no proxy (a proxy from the manager's environment would dial the target itself, unchecked).
// The Proxy function also keeps client-go from caching the config's transport: with Dial alone,
// its TLS transport cache would keep a new transport per config built, as each gets its own dial
// holder (client-go rest/transport.go, transport/cache.go). A config with its own Transport
// cannot be guarded.
func (g *Guard) Apply(cfg *rest.Config) error {
	if cfg.Transport != nil {
		return errors.New("a rest config with its own transport cannot be guarded")
	}
	cfg.Dial = g.DialContext
	cfg.Proxy = noProxy
	return nil
}

// noProxy is a rest.Config.Proxy that never uses a proxy.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// ParsePrefixes parses CIDRs and bare IP addresses (a /32 or /128), as an admin writes them in a
// flag; flag names the flag in the error.
func ParsePrefixes(flag string, values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if a, err := netip.ParseAddr(v); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is neither a CIDR nor an IP address", flag, v)
		}
		out = append(out, p)
	}
	return normalizePrefixes(out), nil
}

// RulesFor returns one rule of class for every prefix.
func RulesFor(class Class, prefixes []netip.Prefix) []Rule {
	out := make([]Rule, 0, len(prefixes))
	for _, p := range prefixes {
		out = append(out, Rule{Prefix: p, Class: class})
	}
	return out
}

// normalizePrefixes masks prefixes and turns IPv4-mapped IPv6 prefixes into IPv4 ones, so they
// match the canonical addresses Check compares.
func normalizePrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		out = append(out, normalize(p))
	}
	return out
}

func normalizeRules(rules []Rule) []Rule {
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		if !r.Prefix.IsValid() {
			continue
		}
		r.Prefix = normalize(r.Prefix)
		out = append(out, r)
	}
	return out
}

func normalize(p netip.Prefix) netip.Prefix {
	a := p.Addr().WithZone("")
	if a.Is4In6() {
		bits := max(p.Bits()-96, 0)
		return netip.PrefixFrom(a.Unmap(), bits).Masked()
	}
	return netip.PrefixFrom(a, p.Bits()).Masked()
}
