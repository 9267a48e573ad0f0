package helm

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// versionCounter counts the requests for the server's version.
type versionCounter struct {
	next     http.RoundTripper
	versions *atomic.Int32
}

func (v versionCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/version" {
		v.versions.Add(1)
	}
	return v.next.RoundTrip(req)
}

// Helm reads the backend's version and API versions anew for every action; the client reads
// them once per TTL for all of its operations, and reads them again after it.
func TestCapabilitiesAreReadOncePerTTL(t *testing.T) {
	backend(t)
	ctx := context.Background()
	var versions atomic.Int32
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return versionCounter{next: rt, versions: &versions} })
	c, err := New(cfg, Options{ChartRef: chartDir, CacheDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.caps.now = func() time.Time { return now }

	var namespaces []string
	for range 2 {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-caps-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns.Name)
	}
	for _, ns := range namespaces {
		rel := Release{Namespace: ns, Name: "vc-caps"}
		if _, err := c.Observe(ctx, rel, vclusterValues()); err != nil {
			t.Fatalf("Observe: %v", err)
		}
		obs, err := c.InstallOrUpgrade(ctx, rel, vclusterValues())
		if err != nil {
			t.Fatalf("InstallOrUpgrade: %v", err)
		}
		if obs.State != StateDeployed {
			t.Fatalf("release in %s is %s, want deployed", ns, obs.State)
		}
	}
	if got := versions.Load(); got != 1 {
		t.Errorf("two observations and two installs asked for the server's version %d times, want 1", got)
	}
	caps, err := c.caps.get()
	if err != nil {
		t.Fatal(err)
	}
	if caps.KubeVersion.Major == "" || !caps.APIVersions.Has("apps/v1") {
		t.Errorf("capabilities %+v lack the server's version or apps/v1", caps)
	}

	now = now.Add(capabilitiesTTL)
	if _, err := c.Observe(ctx, Release{Namespace: namespaces[0], Name: "vc-caps"}, vclusterValues()); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if got := versions.Load(); got != 2 {
		t.Errorf("after the TTL the server's version was asked %d times in all, want 2", got)
	}
}
