package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestRegisterHostCommand runs `manager register-host` as an admin would, with kubeconfig files
// for kcp (as the manager's kcp identity) and the backend, on a real kcp and kube-apiservers.
func TestRegisterHostCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	k := framework.StartKCP(t)
	if err := bootstrap.Bootstrap(ctx, k.Config, bootstrap.PlatformWorkspace); err != nil {
		t.Fatal(err)
	}
	if err := bootstrap.BindManagerRole(ctx, k.Config, bootstrap.PlatformWorkspace, "user"); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	platformCfg := workspaces.ClusterConfig(k.Config, bootstrap.PlatformWorkspace)
	// kcp establishes the bootstrap's CRD a few seconds after it is applied.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := client.New(platformCfg, client.Options{Scheme: scheme})
		return err == nil && c.List(ctx, &fleetv1alpha1.RegisteredClusterList{}) == nil, nil
	}); err != nil {
		t.Fatalf("RegisteredClusters are not served: %v", err)
	}
	admin, err := client.New(platformCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	backend := func(name, providerID string) (kubeconfig, uid, version string) {
		c := framework.StartCluster(t, framework.ClusterOptions{})
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: providerID}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig = filepath.Join(t.TempDir(), name+".kubeconfig")
		if err := devenv.WriteKubeconfig(c.Config, kubeconfig, name); err != nil {
			t.Fatal(err)
		}
		return kubeconfig, string(ns.UID), v.GitVersion
	}
	hostKubeconfig, hostUID, version := backend("host", "aws:///eu-central-1a/i-0abc")
	flags := func(backendKubeconfig string, more ...string) []string {
		return append([]string{
			"--kcp-kubeconfig", k.KubeconfigPath, "--kcp-context", "user",
			"--platform-workspace", bootstrap.PlatformWorkspace,
			"--backend-kubeconfig", backendKubeconfig,
		}, more...)
	}
	run := func(args []string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		code = runRegisterHost(ctx, args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	facts := fmt.Sprintf("(RegisteredCluster host in %s): uid %s, provider aws, region eu-central-1, Kubernetes %s, nodes 1/1\n", bootstrap.PlatformWorkspace, hostUID, version)

	t.Run("registers the backend", func(t *testing.T) {
		code, stdout, stderr := run(flags(hostKubeconfig))
		if want := "Registered the backend cluster as the host " + facts; code != 0 || stdout != want || stderr != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, nothing", code, stdout, stderr, want)
		}
	})
	t.Run("says it is already registered", func(t *testing.T) {
		code, stdout, stderr := run(flags(hostKubeconfig))
		if want := "Already registered: the backend cluster is the host " + facts; code != 0 || stdout != want || stderr != "" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, nothing", code, stdout, stderr, want)
		}
	})
	t.Run("prints the object as JSON", func(t *testing.T) {
		code, stdout, stderr := run(flags(hostKubeconfig, "--output", "json"))
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var rc fleetv1alpha1.RegisteredCluster
		if err := json.Unmarshal([]byte(stdout), &rc); err != nil {
			t.Fatalf("stdout is not a RegisteredCluster: %v\n%s", err, stdout)
		}
		if rc.Kind != "RegisteredCluster" || rc.APIVersion != fleetv1alpha1.GroupVersion.String() || rc.Name != fleetv1alpha1.HostName ||
			rc.Spec.ClusterUID != hostUID || !rc.Spec.IsHost || rc.Status.Provider != "aws" || rc.Status.NodeSummary != "1/1" {
			t.Errorf("got %s %s/%s %+v %s %s", rc.APIVersion, rc.Kind, rc.Name, rc.Spec, rc.Status.Provider, rc.Status.NodeSummary)
		}
	})
	t.Run("refuses another backend and exits 1", func(t *testing.T) {
		otherKubeconfig, otherUID, _ := backend("other", "")
		code, stdout, stderr := run(flags(otherKubeconfig))
		if code != 1 || stdout != "" {
			t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
		}
		for _, want := range []string{"manager register-host: ", hostUID, otherUID, "delete the old record first"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr %q does not say %q", stderr, want)
			}
		}
		var list fleetv1alpha1.RegisteredClusterList
		if err := admin.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Spec.ClusterUID != hostUID {
			t.Errorf("RegisteredClusters %+v, want only host with %s", list.Items, hostUID)
		}
	})
	t.Run("bad flags exit 1", func(t *testing.T) {
		for _, args := range [][]string{
			flags(hostKubeconfig, "--output", "yaml"),
			flags(hostKubeconfig, "extra"),
			{"--no-such-flag"},
		} {
			if code, stdout, stderr := run(args); code != 1 || stdout != "" || stderr == "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1, nothing, an error", args, code, stdout, stderr)
			}
		}
	})
}
