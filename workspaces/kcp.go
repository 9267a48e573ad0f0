package workspaces

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterConfig returns a copy of cfg that talks to the logical cluster or workspace path given,
// e.g. "root:kubeopera": the server URL's path is replaced by /clusters/<path>.
func ClusterConfig(cfg *rest.Config, clusterOrPath string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Host = ServerBase(cfg.Host) + "/clusters/" + clusterOrPath
	return out
}

// ServerBase returns the scheme://host[:port] of a kcp URL, dropping any /clusters/... path.
func ServerBase(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		if i := strings.Index(host, "/clusters/"); i >= 0 {
			return host[:i]
		}
		return strings.TrimRight(host, "/")
	}
	return u.Scheme + "://" + u.Host
}

// KCPScheme knows the kcp types the bootstrap, the terminator and the orphan sweep use.
func KCPScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apisv1alpha1.AddToScheme(s)
	_ = apisv1alpha2.AddToScheme(s)
	_ = corev1alpha1.AddToScheme(s)
	_ = tenancyv1alpha1.AddToScheme(s)
	return s
}

// WorkspaceType references a WorkspaceType by name and path, e.g. kubeopera-tenant in root:kubeopera.
type WorkspaceType struct {
	Name string
	Path string
}

// TenantWorkspaceTypeName is the name of the type of every tenant workspace.
const TenantWorkspaceTypeName = "kubeopera-tenant"

// TenantWorkspaceTypeIn returns the tenant WorkspaceType published in platformWorkspace.
func TenantWorkspaceTypeIn(platformWorkspace string) WorkspaceType {
	return WorkspaceType{Name: TenantWorkspaceTypeName, Path: platformWorkspace}
}

// EnsureWorkspace creates workspace name under parentPath (e.g. "root:orgs") unless it exists,
// waits until it is Ready and returns its logical cluster name. An empty type uses kcp's default.
func EnsureWorkspace(ctx context.Context, cfg *rest.Config, parentPath, name string, wsType WorkspaceType) (string, error) {
	return EnsureWorkspaceOn(ctx, cfg, parentPath, name, wsType, "")
}

// EnsureWorkspaceOn is EnsureWorkspace on the shard named shard (its Shard object's label
// name=<shard>, matched by the Workspace's spec.location.selector); empty lets kcp choose.
func EnsureWorkspaceOn(ctx context.Context, cfg *rest.Config, parentPath, name string, wsType WorkspaceType, shard string) (string, error) {
	c, err := client.New(ClusterConfig(cfg, parentPath), client.Options{Scheme: KCPScheme()})
	if err != nil {
		return "", fmt.Errorf("failed to create client for workspace %s: %w", parentPath, err)
	}
	ws := &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if shard != "" {
		ws.Spec.Location = &tenancyv1alpha1.WorkspaceLocation{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": shard}}}
	}
	if wsType.Name != "" {
		ws.Spec.Type = &tenancyv1alpha1.WorkspaceTypeReference{
			Name: tenancyv1alpha1.WorkspaceTypeName(wsType.Name),
			Path: wsType.Path,
		}
	}
	if err := c.Create(ctx, ws); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create workspace %s:%s: %w", parentPath, name, err)
	}
	var cluster string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ws); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout; kcp may still be warming up.
		}
		cluster = ws.Spec.Cluster
		return ws.Status.Phase == "Ready" && cluster != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("workspace %s:%s did not become Ready (phase %q): %w", parentPath, name, ws.Status.Phase, err)
	}
	return cluster, nil
}

// DeleteWorkspace deletes workspace name under parentPath; a missing workspace is not an error.
func DeleteWorkspace(ctx context.Context, cfg *rest.Config, parentPath, name string) error {
	c, err := client.New(ClusterConfig(cfg, parentPath), client.Options{Scheme: KCPScheme()})
	if err != nil {
		return err
	}
	err = c.Delete(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return client.IgnoreNotFound(err)
}

// LogicalClusterOf returns the logical cluster name of the workspace at path (e.g. root:orgs:demo).
func LogicalClusterOf(ctx context.Context, cfg *rest.Config, path string) (string, error) {
	i := strings.LastIndex(path, ":")
	if i < 0 {
		return "", fmt.Errorf("%q is not a workspace path below root", path)
	}
	c, err := client.New(ClusterConfig(cfg, path[:i]), client.Options{Scheme: KCPScheme()})
	if err != nil {
		return "", err
	}
	ws := &tenancyv1alpha1.Workspace{}
	if err := c.Get(ctx, client.ObjectKey{Name: path[i+1:]}, ws); err != nil {
		return "", fmt.Errorf("failed to get workspace %s: %w", path, err)
	}
	return ws.Spec.Cluster, nil
}
