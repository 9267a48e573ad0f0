package manager

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/netguard"
)

// DefaultPlatformAddressRefresh is how often the platform's own addresses (kcp's and the
// backend's) are looked up again for the target guard.
const DefaultPlatformAddressRefresh = 5 * time.Minute

// TargetGuard returns the guard of every address the manager dials on a tenant's behalf (the
// HostClusters' targets): the default deny classes (netguard.DefaultDeny), --target-deny-cidrs,
// --backend-service-cidrs and --backend-pod-cidrs, with the exceptions of --target-allow-cidrs.
// The platform's own addresses are added by PlatformAddresses.
func (o Options) TargetGuard() (*netguard.Guard, error) {
	allow, err := netguard.ParsePrefixes("--target-allow-cidrs", o.TargetAllowCIDRs)
	if err != nil {
		return nil, err
	}
	rules := netguard.DefaultRules()
	for _, r := range []struct {
		flag   string
		values []string
		class  netguard.Class
	}{
		{"--target-deny-cidrs", o.TargetDenyCIDRs, netguard.AdminDenied},
		{"--backend-service-cidrs", o.BackendServiceCIDRs, netguard.BackendServiceRange},
		{"--backend-pod-cidrs", o.BackendPodCIDRs, netguard.BackendPodRange},
	} {
		ps, err := netguard.ParsePrefixes(r.flag, r.values)
		if err != nil {
			return nil, err
		}
		rules = append(rules, netguard.RulesFor(r.class, ps)...)
	}
	return netguard.New(allow, rules...), nil
}

// PlatformAddresses keeps a guard's view of the platform's own addresses current: kcp's (the
// hosts of the manager's kcp configs and every URL of the endpoint slices it serves: a kcp
// shard each) and the backend's (its API server as the manager reaches it, the kubernetes
// Service's ClusterIPs and EndpointSlice, the ServiceCIDRs, the nodes' pod CIDRs). Everything is
// read at Refresh, which Run does every Interval; endpoint slice URLs also as soon as the fleet
// providers see them (Endpoints). What cannot be read is logged and kept as last read: the flags
// --backend-service-cidrs and --backend-pod-cidrs cover a backend whose ranges the manager may not
// read.
type PlatformAddresses struct {
	// Guard receives the addresses.
	Guard *netguard.Guard
	// Backend reads the backend cluster's Service, EndpointSlice, ServiceCIDRs and nodes; its
	// host is the backend API server's address.
	Backend *rest.Config
	// KCP are the manager's kcp configs; their hosts are kcp's addresses.
	KCP []*rest.Config
	// Resolver resolves host names; nil: net.DefaultResolver.
	Resolver netguard.Resolver
	// Interval is how often Run refreshes; DefaultPlatformAddressRefresh when zero.
	Interval time.Duration
	// Log says what could not be read.
	Log logr.Logger

	mu sync.Mutex
	// shards holds the endpoint slice URLs by export, as Endpoints was last told.
	shards map[string][]string
}

// lookupTimeout bounds the look-ups of one Refresh (or Endpoints call).
const lookupTimeout = 20 * time.Second

// Refresh reads every address now and hands them to the guard.
func (p *PlatformAddresses) Refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	var kcp []netguard.Rule
	for _, c := range p.KCP {
		kcp = append(kcp, p.urlRules(ctx, c.Host, netguard.KCPShard)...)
	}
	p.Guard.SetPlatform("kcp", kcp)
	p.mu.Lock()
	shards := cloneShards(p.shards)
	p.mu.Unlock()
	for export, urls := range shards {
		p.setShards(ctx, export, urls)
	}
	p.Guard.SetPlatform("backend", p.backendRules(ctx))
}

// Endpoints returns the fleet provider hook (fleet.Options.OnEndpoints) of export: the URLs of
// its endpoint slice become rules before their shards are served.
func (p *PlatformAddresses) Endpoints(export string) func(urls []string) {
	return func(urls []string) {
		p.mu.Lock()
		if p.shards == nil {
			p.shards = map[string][]string{}
		}
		p.shards[export] = slices.Clone(urls)
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		defer cancel()
		p.setShards(ctx, export, urls)
	}
}

func (p *PlatformAddresses) setShards(ctx context.Context, export string, urls []string) {
	var rules []netguard.Rule
	for _, u := range urls {
		rules = append(rules, p.urlRules(ctx, u, netguard.KCPShard)...)
	}
	p.Guard.SetPlatform("kcp shards of "+export, rules)
}

// urlRules resolves the server of one of the platform's URLs; a failure is logged and gives no
// rules.
func (p *PlatformAddresses) urlRules(ctx context.Context, u string, class netguard.Class) []netguard.Rule {
	rules, err := netguard.URLRules(ctx, p.Resolver, u, class)
	if err != nil {
		p.Log.Info("Could not resolve one of the platform's own addresses; the target guard does not know it", "class", string(class), "error", err.Error())
	}
	return rules
}

// backendRules reads the backend's own addresses. Every read is made; those that fail are logged.
func (p *PlatformAddresses) backendRules(ctx context.Context) []netguard.Rule {
	rules := p.urlRules(ctx, p.Backend.Host, netguard.BackendAPIServer)
	cs, err := kubernetes.NewForConfig(p.Backend)
	if err != nil {
		p.Log.Info("Could not read the backend's own addresses", "error", err.Error())
		return rules
	}
	var errs []error
	host := func(a string, port int32) {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return
		}
		addr = addr.Unmap()
		prefix := netip.PrefixFrom(addr, addr.BitLen())
		rules = append(rules, netguard.Rule{Prefix: prefix, Class: netguard.BackendAPIServer})
		if port > 0 && port <= 65535 {
			rules = append(rules, netguard.Rule{Prefix: prefix, Port: uint16(port), Class: netguard.BackendAPIServer})
		}
	}
	// The API server in the cluster: Service default/kubernetes (what in-cluster clients dial) and
	// the addresses behind it (its EndpointSlice, kept by the API servers themselves).
	if svc, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("Service default/kubernetes: %w", err))
	} else {
		for _, ip := range svc.Spec.ClusterIPs {
			for _, sp := range svc.Spec.Ports {
				host(ip, sp.Port)
			}
		}
	}
	if es, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("EndpointSlice default/kubernetes: %w", err))
	} else {
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				for _, port := range es.Ports {
					if port.Port != nil {
						host(a, *port.Port)
					}
				}
			}
		}
	}
	// The service range: the ServiceCIDRs (networking.k8s.io/v1, Kubernetes 1.33+), which hold
	// the API server's --service-cluster-ip-range.
	if list, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("ServiceCIDRs: %w", err))
	} else {
		for _, sc := range list.Items {
			rules = append(rules, cidrRules(sc.Spec.CIDRs, netguard.BackendServiceRange)...)
		}
	}
	// The pod range: what the node IPAM gave each node (spec.podCIDRs); CNIs that hand out
	// addresses of the nodes' network instead leave it empty: --backend-pod-cidrs then.
	opts := metav1.ListOptions{Limit: 500}
	for {
		nodes, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodes: %w", err))
			break
		}
		for _, n := range nodes.Items {
			rules = append(rules, nodePodCIDRs(n)...)
		}
		if opts.Continue = nodes.Continue; opts.Continue == "" {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		p.Log.Info("Could not read some of the backend's own addresses; the target guard keeps to what it read and the flags", "error", err.Error())
	}
	return rules
}

func nodePodCIDRs(n corev1.Node) []netguard.Rule {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	return cidrRules(cidrs, netguard.BackendPodRange)
}

func cidrRules(cidrs []string, class netguard.Class) []netguard.Rule {
	var out []netguard.Rule
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, netguard.Rule{Prefix: p, Class: class})
		}
	}
	return out
}

// Start refreshes every Interval until ctx ends (a manager.Runnable). The first Refresh is the
// caller's, before the manager starts.
func (p *PlatformAddresses) Start(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultPlatformAddressRefresh
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.Refresh(ctx)
		}
	}
}

// NeedLeaderElection is false: every replica dials targets, so every replica keeps its guard.
func (p *PlatformAddresses) NeedLeaderElection() bool { return false }

func cloneShards(m map[string][]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
