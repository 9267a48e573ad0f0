// Package netguard keeps the manager from dialing addresses it must never reach on a tenant's
// behalf: loopback, link-local (with the cloud metadata and credential endpoints), unspecified,
// multicast and reserved addresses, the backend cluster's own service and pod ranges and API
// servers, kcp's shards, and ranges the platform admin denies.
//
// A tenant supplies addresses in a kubeconfig's server (connect_existing), in what their cloud
// account answers a provisioning run (the provisioned cluster's kubeconfig), and in DNS: a name
// can resolve to anything, and resolve to something else a second later. So the check is made
// where the connection is made: Guard.DialContext dials with a net.Dialer whose Control hook sees
// the address each connection attempt actually goes to (every address a name resolved to, every
// redirect), after resolution and before the connect system call. An IPv4-mapped IPv6 address
// (::ffff:127.0.0.1) is checked as the IPv4 address it is, and an address of the NAT64 prefix
// 64:ff9b::/96 also as the IPv4 address it embeds.
//
// Rules: every Rule is a prefix with a class, optionally limited to one port (the platform's own
// endpoints: a kcp shard's or the backend API server's address and port). Exceptions are
// prefixes an admin allows. The most specific rule decides: a rule with a port beats every
// prefix; among prefixes the longer one wins; an exception as long as a deny rule wins over it.
// So 127.0.0.1/32 allowed lets a target on 127.0.0.1 through (loopback is 127.0.0.0/8) but never
// kcp's own 127.0.0.1:6443, and an admin who allows 10.0.0.0/8 still never lets a tenant reach the
// /32 of a kcp shard inside it.
//
// A refused dial fails with a *ForbiddenError naming the class ("loopback", "link-local (cloud
// metadata)", "the backend's service range", "a kcp shard", ...), never the address: a tenant
// who points a name at an internal address learns that it is forbidden, not what it resolved to.
// client-go wraps it (url.Error, net.OpError); AsForbidden finds it.
//
// Private ranges (RFC 1918, unique local IPv6) and the shared address space are not denied by
// default: a tenant's cluster may well sit in a private network the backend reaches. An admin
// whose backend shares such a network with things tenants must not reach denies them
// (--target-deny-cidrs in internal/manager).
package netguard
