package helm

import (
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/client-go/discovery"
)

// capabilitiesTTL is how long the backend's capabilities (its version and API versions, what a
// chart's .Capabilities says) are reused. Helm reads them anew for every install and upgrade,
// invalidating its discovery cache each time: five requests (/version twice, /api, /apis and
// the aggregated discovery) before the first object is written, for an answer that changes
// when the backend is upgraded or an API is added. A minute later every operation sees the
// change.
const capabilitiesTTL = time.Minute

// capabilities caches the backend's capabilities for capabilitiesTTL; one serves every
// operation of an SDKClient.
type capabilities struct {
	discovery discovery.CachedDiscoveryInterface
	ttl       time.Duration
	now       func() time.Time

	mu   sync.Mutex
	caps *common.Capabilities
	at   time.Time
}

// get returns the capabilities, read anew (with the discovery cache invalidated, as Helm does)
// when none were read in the last ttl. A failed read is not kept: the next call asks again.
func (c *capabilities) get() (*common.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps != nil && c.now().Sub(c.at) < c.ttl {
		return c.caps, nil
	}
	// As Helm's Configuration.getCapabilities (pkg/action/action.go) builds them.
	c.discovery.Invalidate()
	version, err := c.discovery.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("could not get server version from Kubernetes: %w", err)
	}
	apiVersions, err := action.GetVersionSet(c.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("could not get apiVersions from Kubernetes: %w", err)
	}
	c.caps = &common.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: common.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}
	c.at = c.now()
	return c.caps, nil
}

// kubeClient is Helm's kube client whose reachability check is the capabilities' read: Helm
// asks every action (history included) for the server's version first, one request each; the
// capabilities read in the last ttl already prove the backend answers, and a backend that
// stopped answering since fails the action's first real request all the same.
type kubeClient struct {
	*helmkube.Client
	caps *capabilities
}

func (k kubeClient) IsReachable() error {
	if _, err := k.caps.get(); err != nil {
		return fmt.Errorf("kubernetes cluster unreachable: %w", err)
	}
	return nil
}
