package manager

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestTargetGuardFlags: the flags become rules of their classes and exceptions; a bad value is
// refused, naming the flag.
func TestTargetGuardFlags(t *testing.T) {
	g, err := Options{
		TargetDenyCIDRs:     []string{"192.168.0.0/16"},
		TargetAllowCIDRs:    []string{"127.0.0.1", "10.0.0.0/8"},
		BackendServiceCIDRs: []string{"10.96.0.0/12"},
		BackendPodCIDRs:     []string{"10.244.0.0/16"},
	}.TargetGuard()
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]netguard.Class{
		"192.168.4.4:443":      netguard.AdminDenied,
		"10.96.0.1:443":        netguard.BackendServiceRange,
		"10.244.3.3:443":       netguard.BackendPodRange,
		"10.1.0.1:443":         "",
		"127.0.0.1:6443":       "",
		"127.0.0.2:6443":       netguard.Loopback,
		"169.254.169.254:80":   netguard.CloudMetadata,
		"[fd00:ec2::254]:80":   netguard.CloudMetadata,
		"172.16.0.1:443":       "", // private ranges are not denied by default
		"[fd12:3456::1]:443":   "",
		"[::ffff:10.96.0.1]:1": netguard.BackendServiceRange,
	} {
		err := g.Check(netip.MustParseAddrPort(addr))
		f, _ := netguard.AsForbidden(err)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", addr, err)
		case want != "" && (f == nil || f.Class != want):
			t.Errorf("%s: %v, want refused as %q", addr, err, want)
		}
	}
	if _, err := (Options{TargetAllowCIDRs: []string{"localhost"}}).TargetGuard(); err == nil || !strings.Contains(err.Error(), "--target-allow-cidrs") {
		t.Errorf("a host name as a CIDR: %v, want an error naming --target-allow-cidrs", err)
	}
}

// TestPlatformAddressesOnARealBackend reads the backend's own addresses from a real
// kube-apiserver with the manager's backend identity as shipped (config/rbac): the API server
// the manager talks to, the kubernetes Service and its EndpointSlice, the ServiceCIDRs the API
// server made from its --service-cluster-ip-range, and the pod CIDR the node IPAM gave a node;
// and kcp's addresses from the kcp configs and an endpoint slice's URL. Every check is a pure
// decision of the guard: nothing is dialed.
func TestPlatformAddressesOnARealBackend(t *testing.T) {
	ctx := context.Background()
	b := framework.StartBackend(t)
	id, err := framework.ManagerIdentity(ctx, b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(b.Config)
	// What kube-controller-manager's node IPAM does for a node: spec.podCIDRs.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cidrs, err := admin.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil || len(cidrs.Items) == 0 || len(cidrs.Items[0].Spec.CIDRs) == 0 {
		t.Fatalf("the backend has no ServiceCIDR (err %v)", err)
	}
	serviceRange := netip.MustParsePrefix(cidrs.Items[0].Spec.CIDRs[0])
	es, err := admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(es.Endpoints) == 0 || len(es.Endpoints[0].Addresses) == 0 || len(es.Ports) == 0 {
		t.Fatalf("the backend's kubernetes EndpointSlice has no endpoint (err %v)", err)
	}

	var logs syncBuffer
	g, err := Options{TargetAllowCIDRs: []string{"127.0.0.1/32", "10.0.0.0/8"}}.TargetGuard()
	if err != nil {
		t.Fatal(err)
	}
	p := &PlatformAddresses{
		Guard:   g,
		Backend: id.Config,
		KCP:     []*rest.Config{{Host: "https://kcp.platform.example:6443/clusters/root:kubeopera"}},
		Resolver: staticResolver{
			"kcp.platform.example": {netip.MustParseAddr("10.9.8.7")},
			"shard-2.example":      {netip.MustParseAddr("10.9.8.6")},
		},
		Log: funcr.New(func(prefix, args string) { logs.WriteString(prefix + " " + args + "\n") }, funcr.Options{}),
	}
	p.Refresh(ctx)
	p.Endpoints("kubeopera.io")([]string{"https://shard-2.example/services/apiexport/abc/kubeopera.io"})

	backend, err := url.Parse(id.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	ep := es.Endpoints[0].Addresses[0]
	for addr, want := range map[string]netguard.Class{
		backend.Host: netguard.BackendAPIServer, // 127.0.0.1:<port>, despite 127.0.0.1/32 allowed
		net.JoinHostPort(svc.Spec.ClusterIP, itoa(svc.Spec.Ports[0].Port)): netguard.BackendAPIServer,
		net.JoinHostPort(ep, itoa(*es.Ports[0].Port)):                      netguard.BackendAPIServer,
		net.JoinHostPort(serviceRange.Addr().Next().Next().String(), "80"): netguard.BackendServiceRange,
		"10.244.1.7:8080": netguard.BackendPodRange,
		"10.9.8.7:6443":   netguard.KCPShard,
		"10.9.8.7:2379":   netguard.KCPShard, // the whole host, inside the allowed 10.0.0.0/8
		"10.9.8.6:443":    netguard.KCPShard,
		"10.200.0.1:6443": "", // private, allowed, none of the platform's
		"127.0.0.1:1":     "", // the allowed loopback address, not the backend's port
	} {
		err := g.Check(netip.MustParseAddrPort(addr))
		f, _ := netguard.AsForbidden(err)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", addr, err)
		case want != "" && (f == nil || f.Class != want):
			t.Errorf("%s: %v, want refused as %q", addr, err, want)
		}
	}
	if strings.Contains(logs.String(), "Could not") {
		t.Errorf("the manager's identity could not read everything:\n%s", logs.String())
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
