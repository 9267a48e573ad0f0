package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/manifests"
)

const (
	// ManagerNamespace and ManagerServiceAccount name the manager's backend identity
	// (config/rbac/service-account.yaml): system:serviceaccount:kubeopera-system:kubeopera-manager.
	ManagerNamespace      = "kubeopera-system"
	ManagerServiceAccount = "kubeopera-manager"
	// MetricsReaderServiceAccount is a ServiceAccount of ManagerNamespace bound to ClusterRole
	// kubeopera-metrics-reader (config/rbac/metrics-reader.yaml) by MetricsReaderToken: who reads
	// /metrics in the dev environment and the tests.
	MetricsReaderServiceAccount = "kubeopera-metrics-reader"
	// admissionPolicy is the ValidatingAdmissionPolicy of config/rbac/admission-policy.yaml.
	admissionPolicy = "kubeopera-manager-backend-scope"
	// rbacFieldOwner is the server-side apply field manager of ApplyBackendRBAC.
	rbacFieldOwner = "kubeopera-devenv"
)

// ManagerIdentity prepares the manager's backend identity exactly as the product ships it: it
// applies the manifests of rbacDir (config/rbac) with adminCfg, asks the TokenRequest API for a
// token of ServiceAccount kubeopera-system/kubeopera-manager valid for ttl, writes a kubeconfig
// with only that token to kubeconfigPath, and waits until the identity works and the admission
// policy confines it. It returns the identity's config.
func ManagerIdentity(ctx context.Context, adminCfg *rest.Config, rbacDir, kubeconfigPath string, ttl time.Duration) (*rest.Config, error) {
	if err := ApplyBackendRBAC(ctx, adminCfg, rbacDir); err != nil {
		return nil, err
	}
	cfg, err := ServiceAccountConfig(ctx, adminCfg, ManagerNamespace, ManagerServiceAccount, ttl)
	if err != nil {
		return nil, err
	}
	if err := waitConfined(ctx, cfg); err != nil {
		return nil, err
	}
	if err := WriteKubeconfig(cfg, kubeconfigPath, "kubeopera-manager"); err != nil {
		return nil, fmt.Errorf("failed to write the manager's backend kubeconfig: %w", err)
	}
	return cfg, nil
}

// ApplyBackendRBAC server-side applies every manifest of dir (config/rbac: the manager's
// ServiceAccount, ClusterRoles, bindings, admission policy and the metrics-reader role) with cfg,
// a backend admin, after creating namespace kubeopera-system if it is missing. It is idempotent.
func ApplyBackendRBAC(ctx context.Context, cfg *rest.Config, dir string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create namespace %s: %w", ManagerNamespace, err)
	}
	objs, err := readManifests(dir)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		obj.SetManagedFields(nil)
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(rbacFieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), dir, err)
		}
	}
	return nil
}

// readManifests decodes every object of the .yaml files of dir but its kustomization.yaml.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		decoded, err := manifests.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, decoded...)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no manifests in %s", dir)
	}
	return objs, nil
}

// ServiceAccountConfig returns a config for ServiceAccount namespace/name: cfg's server and CA and
// a token from the TokenRequest API valid for ttl, and no other credential.
func ServiceAccountConfig(ctx context.Context, cfg *rest.Config, namespace, name string, ttl time.Duration) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	seconds := int64(ttl / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to request a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            cfg.Host,
		APIPath:         cfg.APIPath,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData, CAFile: cfg.CAFile, ServerName: cfg.ServerName, Insecure: cfg.Insecure},
		BearerToken:     tr.Status.Token,
		QPS:             cfg.QPS,
		Burst:           cfg.Burst,
	}, nil
}

// MetricsReaderToken creates ServiceAccount kubeopera-system/kubeopera-metrics-reader, binds it to
// ClusterRole kubeopera-metrics-reader (applied by ApplyBackendRBAC) and returns a token of it
// valid for ttl: what a scraper presents to the manager's /metrics.
func MetricsReaderToken(ctx context.Context, cfg *rest.Config, ttl time.Duration) (string, error) {
	return ClusterRoleToken(ctx, cfg, MetricsReaderServiceAccount, "kubeopera-metrics-reader", ttl)
}

// FleetViewerServiceAccount is the ServiceAccount FleetViewerToken binds to ClusterRole
// kubeopera-fleet-viewer.
const FleetViewerServiceAccount = "kubeopera-fleet-viewer"

// FleetViewerToken creates ServiceAccount kubeopera-system/kubeopera-fleet-viewer, binds it to
// ClusterRole kubeopera-fleet-viewer (config/rbac/fleet-viewer.yaml, applied by ApplyBackendRBAC)
// and returns a token of it valid for ttl: what a platform admin signs in to the secure fleet
// overview with.
func FleetViewerToken(ctx context.Context, cfg *rest.Config, ttl time.Duration) (string, error) {
	return ClusterRoleToken(ctx, cfg, FleetViewerServiceAccount, "kubeopera-fleet-viewer", ttl)
}

// ClusterRoleToken creates ServiceAccount kubeopera-system/<name>, binds it (ClusterRoleBinding
// <name>) to clusterRole and returns a token of it valid for ttl.
func ClusterRoleToken(ctx context.Context, cfg *rest.Config, name, clusterRole string, ttl time.Duration) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: name}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ManagerNamespace, Name: name}},
	}
	if err := c.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to bind %s: %w", clusterRole, err)
	}
	sc, err := ServiceAccountConfig(ctx, cfg, ManagerNamespace, name, ttl)
	if err != nil {
		return "", err
	}
	return sc.BearerToken, nil
}

// waitConfined waits until the identity of cfg may create a kcp-* namespace (its RBAC is in
// effect) and is refused another one by the admission policy (the policy is in effect), both as
// server-side dry runs that change nothing.
func waitConfined(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	// Namespaces as the manager makes them (labelled with a workspace fingerprint); the policy
	// refuses the manager any other.
	probe := func(name string) error {
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"kubeopera.io/workspace-fingerprint": "identityprobe"},
		}}, client.DryRunAll)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := probe("kcp-identity-probe"); err != nil && !apierrors.IsAlreadyExists(err) {
			last = "creating namespace kcp-identity-probe: " + err.Error()
			return false, nil
		}
		err := probe("kubeopera-identity-probe")
		if err == nil || !strings.Contains(err.Error(), admissionPolicy) {
			last = fmt.Sprintf("creating namespace kubeopera-identity-probe was not refused by %s: %v", admissionPolicy, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the manager's backend identity is not in effect: %s", last)
	}
	return nil
}
