package scaffolding_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/scaffolding"
)

// stubRunner is this test's runner: it checks what the Job gives it (its environment, the mounted
// inputs, writable emptyDirs) and exits, 0 when everything is there. The real cmd/scaffold-runner
// runs in TestScaffoldTwoPassesUnsealedOnTheTarget and the e2e suite.
const stubRunner = `#!/bin/sh
set -e
test "$SCAFFOLD_SLUG" = prod-1
test "$SCAFFOLD_BRANCH" = main
test "$POD_NAMESPACE" = kubeopera-provisioning
test "$(cat "$SCAFFOLD_INPUTS_DIR/kubeconfig")" = "$(printf '%s' "$EXPECTED_KUBECONFIG")"
touch "$TMPDIR/x" "$HOME/x"
echo "scaffold $SCAFFOLD_ID of $SCAFFOLD_SLUG ran"
`

const kubeconfigValue = "apiVersion: v1\nkind: Config\n"

// The scaffolding side as e2e and make run start it: the real scaffolder, as its own
// ServiceAccount, reads the stored kubeconfig the manager granted it, and the scaffold's Job, as
// Create makes it, runs in sim.RunnerJobs' played Pod (the binary picked by the image's name,
// scaffold-runner), succeeding when the runner exits 0. The provisioning side's actor, on its own
// Node, leaves the scaffold's Job alone.
func TestScaffoldRunsInThePlayedPod(t *testing.T) {
	b := framework.StartBackend(t)
	ctx := t.Context()
	stub := filepath.Join(t.TempDir(), "scaffold-runner")
	if err := os.WriteFile(stub, []byte(stubRunner), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := scaffolding.Start(ctx, scaffolding.Options{Backend: b.Config, Root: framework.RepoRoot(), RunnerBinary: stub,
		Env: map[string]string{"EXPECTED_KUBECONFIG": kubeconfigValue}, Log: &testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	terraform := &sim.RunnerJobs{Backend: b.Config, Namespace: api.DefaultJobsNamespace, RunnerBinary: "/nonexistent/terraform-runner", Log: &testLog{t}}
	tctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- terraform.Run(tctx) }()
	t.Cleanup(func() { stop(); <-done })

	// The manager's stored kubeconfig in kcp-<fp>, and its grant to the scaffolder.
	cs := kubernetes.NewForConfigOrDie(b.Config)
	kcp := "kcp-d37f1981a6be"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kcp}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kcp, Name: "hostcluster-prod-1-kubeconfig"}, StringData: map[string]string{api.KubeconfigKey: kubeconfigValue}}
	if _, err := cs.CoreV1().Secrets(kcp).Create(ctx, kc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.GrantSecretRead(ctx, t, cs, kcp, kc.Name, api.DefaultJobsNamespace, "gitops-scaffolder")

	cl, err := client.New(e.URL, e.APIKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := api.Request{
		ClusterID: "prod-1", Slug: "prod-1", Domain: "prod-1.example.com", RepoURL: "https://git.example.com/acme/fleet.git",
		Path: "fluxcd/clusters/prod-1", KubeconfigSecretRef: api.SecretRef{Namespace: kcp, Name: kc.Name},
		Workspace: "1bg4baqdjkcw9lz4", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
	var s api.Scaffold
	framework.Eventually(t, 10*time.Second, "the grant to take effect", func() (bool, string) {
		s, err = cl.Create(ctx, req)
		return err == nil, ""
	})
	framework.Eventually(t, 60*time.Second, "the scaffold to end", func() (bool, string) {
		s, err = cl.Get(ctx, s.ID)
		return err == nil && s.Done(), string(s.Status) + ": " + s.Message + s.Error
	})
	out, _ := e.Runner.Output(api.JobName(s.ID))
	if !s.Succeeded() || !strings.Contains(out, "scaffold "+s.ID+" of prod-1 ran") {
		t.Fatalf("the scaffold: %+v; the runner said:\n%s", s, out)
	}
	pods, err := cs.CoreV1().Pods(api.DefaultJobsNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != scaffolding.NodeName {
		t.Errorf("the scaffold's pods: %d (%v), want one on %s", len(pods.Items), err, scaffolding.NodeName)
	}
}

// testLog is the actors' diagnostics in the test's log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
