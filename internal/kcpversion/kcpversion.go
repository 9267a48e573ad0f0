// Package kcpversion tells which kcp a manager talks to and whether it can work with it.
//
// kcp reports its version where every Kubernetes API server does, at /version, in gitVersion:
// kcp's release builds stamp it "<Kubernetes version>+kcp-<kcp version>", e.g.
// "v1.35.1+kcp-v0.31.2" (kcp's Makefile: GIT_VERSION, linked into
// k8s.io/component-base/version.gitVersion). The manager reads it through the workspace path
// it is configured with, so the answer comes from the same front-proxy or shard it works
// against.
package kcpversion

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// The kcp lines the manager is built and tested for: from Minimum up to, not including, Beyond.
// Its kcp client modules are of the v0.32 line; its tests run a v0.31 server.
var (
	// Minimum is the oldest kcp the manager works with: v0.31 introduced the API shapes it uses
	// (apis.kcp.io/v1alpha2 APIBindings and permission claims, APIExportEndpointSlices with
	// per-shard endpoints).
	Minimum = version.MustParseSemantic("v0.31.0")
	// Beyond is the first kcp line the manager is not built for.
	Beyond = version.MustParseSemantic("v0.33.0")
)

// Fixed are the first releases of each line with the fix of CVE-2026-61682
// (GHSA-c8w2-fgvx-vhv4): older kcp front-proxies pass inbound X-Remote-* headers through, so any
// authenticated client can act as system:masters in any workspace.
var Fixed = []*version.Version{version.MustParseSemantic("v0.31.3"), version.MustParseSemantic("v0.32.1")}

// Info is what a kcp server says of its version.
type Info struct {
	// GitVersion is /version's gitVersion, as the server reported it.
	GitVersion string
	// KCP is the kcp release in it; nil when GitVersion names none.
	KCP *version.Version
}

// String returns the kcp version, or the raw gitVersion when it names no kcp release.
func (i Info) String() string {
	if i.KCP != nil {
		return "v" + i.KCP.String()
	}
	return fmt.Sprintf("%q", i.GitVersion)
}

// Parse reads the kcp release out of a kcp server's gitVersion ("v1.35.1+kcp-v0.31.2"). A
// gitVersion without "+kcp-v<semver>" (a Kubernetes API server, or a kcp built without its
// release stamp) yields an Info with no KCP.
func Parse(gitVersion string) Info {
	info := Info{GitVersion: gitVersion}
	_, after, ok := strings.Cut(gitVersion, "+kcp-")
	if !ok {
		return info
	}
	if v, err := version.ParseSemantic(after); err == nil {
		info.KCP = v
	}
	return info
}

// Get asks the server of cfg for its version.
func Get(cfg *rest.Config) (Info, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Info{}, err
	}
	// ServerVersion reads /version under the config's path (a workspace's /clusters/<path>).
	v, err := dc.ServerVersion()
	if apierrors.IsNotFound(err) {
		// No /clusters/<path>/version: no kcp (a plain API server serves /version at its root
		// only), or no such workspace. The root's answer names what the server is.
		root := rest.CopyConfig(cfg)
		if u, perr := url.Parse(root.Host); perr == nil && u.Path != "" {
			u.Path = ""
			root.Host = u.String()
			if rdc, rerr := discovery.NewDiscoveryClientForConfig(root); rerr == nil {
				if rv, rerr := rdc.ServerVersion(); rerr == nil {
					if info := Parse(rv.GitVersion); info.KCP == nil {
						return info, nil
					}
				}
			}
		}
	}
	if err != nil {
		return Info{}, fmt.Errorf("failed to read the kcp server's version at %s: %w", cfg.Host, err)
	}
	return Parse(v.GitVersion), nil
}

// Check returns an error, naming the version found, unless the manager can work with the kcp
// of info.
func Check(info Info) error {
	if info.KCP == nil {
		return fmt.Errorf("the server at the kcp kubeconfig reports version %q, which names no kcp release (want %q, as kcp's release builds report it); the manager needs kcp v%d.%d or v%d.%d",
			info.GitVersion, "<kubernetes version>+kcp-<kcp version>", Minimum.Major(), Minimum.Minor(), Minimum.Major(), Beyond.Minor()-1)
	}
	if info.KCP.LessThan(Minimum) || !info.KCP.LessThan(Beyond) {
		return fmt.Errorf("kcp %s is not supported: the manager works with kcp v%d.%d and v%d.%d (v0.31.3 or newer, v0.32.1 or newer in production)",
			info, Minimum.Major(), Minimum.Minor(), Minimum.Major(), Beyond.Minor()-1)
	}
	return nil
}

// Vulnerable reports whether the kcp of info is a release without the fix of CVE-2026-61682:
// older than the first fixed release of its line.
func Vulnerable(info Info) bool {
	if info.KCP == nil {
		return false
	}
	for _, f := range Fixed {
		if info.KCP.Major() == f.Major() && info.KCP.Minor() == f.Minor() {
			return info.KCP.LessThan(f)
		}
	}
	return false
}
