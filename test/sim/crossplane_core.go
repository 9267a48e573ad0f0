package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// Crossplane core v2.2.0 (github.com/crossplane/crossplane, tag v2.2.0, commit
// b7aa9852801ca9959eefdad8233f95635df348c2) as its Helm chart runs it
// (cluster/charts/crossplane/templates/deployment.yaml): the names below are the chart's and the
// package manager's. File names are relative to that tree.
const (
	// CrossplaneNamespace is where Crossplane runs and keeps its TLS Secrets (the chart's
	// namespace; POD_NAMESPACE, default crossplane-system: cmd/crossplane/core/core.go line 102).
	CrossplaneNamespace = "crossplane-system"
	// crossplaneRootCASecret, crossplaneClientSecret: the Secrets `crossplane core init` fills
	// with the CA and Crossplane's gRPC client certificate (deployment.yaml lines 125-130;
	// internal/initializer/tls.go line 53). Keys: ca.crt, tls.crt, tls.key.
	crossplaneRootCASecret = "crossplane-root-ca"
	crossplaneClientSecret = "crossplane-tls-client"
	// crossplaneTLSServerSuffix names a Function's TLS server Secret: <function>-tls-server
	// (apis/pkg/v1/interfaces.go, Function.GetTLSServerSecretName, TLSServerSecretNameSuffix).
	crossplaneTLSServerSuffix = "-tls-server"
	// crossplaneFunctionPort is the port a function serves gRPC on (internal/controller/pkg/
	// runtime/runtime.go GRPCPort 9443; function-sdk-go's default --address :9443).
	crossplaneFunctionPort = 9443
	// crossplaneParentLabel names a package revision's Function (apis/pkg/v1
	// LabelParentPackage); the function runner finds the active revision by it
	// (internal/xfn/function_runner.go lines 190-210).
	crossplaneParentLabel = "pkg.crossplane.io/package"
	// crossplaneXpkgAnnotation marks the layer of a package image that holds package.yaml
	// (internal/xpkg/name.go lines 33-55, AnnotationKey io.crossplane.xpkg, PackageAnnotation
	// base; client.go ExtractPackageYAML).
	crossplaneXpkgAnnotation = "io.crossplane.xpkg"

	// FunctionPatchAndTransform is the Function the platform's Compositions name
	// (config/crossplane, functionRef.name).
	FunctionPatchAndTransform = "function-patch-and-transform"
)

var (
	// CrossplaneFunctionGVR and CrossplaneFunctionRevisionGVR: Crossplane's function packages.
	CrossplaneFunctionGVR         = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functions"}
	CrossplaneFunctionRevisionGVR = schema.GroupVersionResource{Group: "pkg.crossplane.io", Version: "v1", Resource: "functionrevisions"}
	// crossplaneCompositionRevisionGVR: what Crossplane makes of every Composition.
	crossplaneCompositionRevisionGVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositionrevisions"}
)

// CrossplaneOptions configures StartCrossplane.
type CrossplaneOptions struct {
	// Backend is the backend's admin config. Crossplane runs with it (its chart binds its
	// ServiceAccount to a ClusterRole that the RBAC manager keeps growing; the admin stands in
	// for both), written as a kubeconfig into Dir. Its server must be on 127.0.0.1.
	Backend *rest.Config
	// ToolsDir is _tools: bin/crossplane, bin/function-patch-and-transform, crossplane/crds (the
	// CRDs `crossplane core init` installs) and crossplane/function-patch-and-transform (the
	// function's package metadata), all put there by `make tools`.
	ToolsDir string
	// Dir holds the processes' files (certificates, the package cache); created when missing.
	Dir string
	// Log receives Crossplane's and the functions' output, each line prefixed with its
	// process's name; nil discards.
	Log io.Writer
	// Debug runs Crossplane and the functions with --debug.
	Debug bool
	// Processes records the processes; nil records nothing. They die with this process either
	// way (devenv.Processes).
	Processes *devenv.Processes
}

// Crossplane is Crossplane core and its composition functions running as processes against a
// backend, as the Crossplane Helm chart and the package manager would run them in Pods
// (StartCrossplane).
type Crossplane struct {
	opts       CrossplaneOptions
	kubeconfig string
	island     *devenv.Island
	registry   *http.Server
	// registryAddr is the package registry's host:port, on 127.0.0.1 both outside and inside
	// the island.
	registryAddr string
	logs         *lineWriter

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	core      *devenv.Child
	functions map[string]*crossplaneFunction // by FunctionRevision name
	stopped   bool
}

// crossplaneFunction is one function process.
type crossplaneFunction struct {
	name     string // the Function's
	revision string
	endpoint string
	child    *devenv.Child
}

// StartCrossplane runs Crossplane core v2.2.0 and function-patch-and-transform on a backend,
// as processes built by `make tools`, standing in only for the Pods that would run them:
//
//   - `crossplane core init` (the chart's init container): installs Crossplane's CRDs from
//     _tools/crossplane/crds (--crds-path; the image has them at /crds), the CA and client
//     certificate Secrets, the package Lock, the default DeploymentRuntimeConfig and
//     ManagedResourceActivationPolicy, with webhooks off (ENABLE_WEBHOOKS false, as the chart
//     sets it when webhooks.enabled is false).
//   - `crossplane core start` (the chart's container) with --package-runtime=External: the
//     package manager installs packages but runs no Deployments for them (design/
//     one-pager-package-runtime-config.md: "External - Do nothing, defer to an external
//     controller"; internal/controller/pkg/pkg.go lines 43-53). The client certificate the chart
//     mounts at /tls/client is written into Dir (the kubelet's Secret volume). Crossplane binds
//     its metrics and health listeners to every interface (":8080", ":8081"), so it runs in a
//     devenv.Island of its own: its listeners stay there, and it reaches the apiserver and the
//     package registry through forwards at their own 127.0.0.1 addresses.
//   - The Function function-patch-and-transform is installed as a platform admin installs it: a
//     pkg.crossplane.io/v1 Function whose package Crossplane's package manager pulls, from a
//     registry on 127.0.0.1 (go-containerregistry's, in this process) holding the package built
//     from the function module's own package/ directory (crossplane.yaml and its input's CRD;
//     one layer with package.yaml, annotated io.crossplane.xpkg: base, as `crossplane xpkg build`
//     makes it: internal/xpkg/build.go line 204). The package manager makes the
//     FunctionRevision, installs the input CRD and records the function's capabilities.
//   - What the External runtime leaves to "an external controller", this does, as Crossplane's
//     Deployment runtime does for a Function (internal/controller/pkg/runtime/
//     runtime_function.go, FunctionHooks.Pre lines 64-113): for each active FunctionRevision of
//     a function it has a binary for, the TLS server Secret <function>-tls-server in
//     crossplane-system, signed by the root CA (ca.crt, tls.crt, tls.key; serverAuth, 10 years,
//     RSA 2048: internal/initializer/tls.go lines 245-305, cert_generator.go), the function's
//     process with those certificates (the Deployment's Pod), and the revision's
//     status.endpoint (there "dns:///<service>.<namespace>:9443"; here 127.0.0.1:9443 in the
//     island, so the certificate names IP 127.0.0.1) and RuntimeHealthy True
//     (HealthyPackageRevision: internal/controller/pkg/runtime/reconciler.go line 397) once the
//     process listens. Crossplane dials the endpoint with its client certificate
//     (internal/xfn/function_runner.go; cmd/crossplane/core/core.go lines 275-291), falling back
//     to the v1beta1 protocol for functions as old as v0.5.0 (function_runner.go lines 342-387).
//
// What is not played: the RBAC manager (Crossplane runs as the backend's admin), webhooks,
// leader election, ImageConfigs and package signatures, more than one replica, and restarts of a
// process that exits (a test sees it in the log and in what stops happening).
func StartCrossplane(ctx context.Context, opts CrossplaneOptions) (*Crossplane, error) {
	bin := filepath.Join(opts.ToolsDir, "bin")
	for _, p := range []string{filepath.Join(bin, "crossplane"), filepath.Join(bin, FunctionPatchAndTransform),
		filepath.Join(opts.ToolsDir, "crossplane", "crds"), filepath.Join(opts.ToolsDir, "crossplane", FunctionPatchAndTransform, "crossplane.yaml")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make tools`: %w", p, err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	cfg := opts.Backend
	kubeconfig := filepath.Join(opts.Dir, "crossplane.kubeconfig")
	if err := devenv.WriteKubeconfig(cfg, kubeconfig, "backend"); err != nil {
		return nil, err
	}
	apiserver, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	if apiserver.Hostname() != "127.0.0.1" || apiserver.Port() == "" {
		return nil, fmt.Errorf("crossplane: the backend must be at 127.0.0.1:<port>, not %s", cfg.Host)
	}
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	c := &Crossplane{opts: opts, kubeconfig: kubeconfig, logs: &lineWriter{out: out}, functions: map[string]*crossplaneFunction{}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CrossplaneNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}

	// The init container, configured by the environment the chart gives it (deployment.yaml lines
	// 91-130; CRDS_PATH stands for the image's /crds).
	// A failed init container is run again by the kubelet: `crossplane core init` applies its
	// CRDs and then, without waiting for them to be established, the Lock
	// (internal/initializer/crds.go, lock.go), so a first run on a fresh apiserver fails with
	// `no matches for kind "Lock"`. The kubelet waits 10 s, doubling, between runs (FluxPods
	// cites it); here 1 s, a few times.
	initEnv := []string{
		"CRDS_PATH=" + filepath.Join(opts.ToolsDir, "crossplane", "crds"),
		"ENABLE_WEBHOOKS=false",
		"TLS_CA_SECRET_NAME=" + crossplaneRootCASecret,
		"TLS_SERVER_SECRET_NAME=crossplane-tls-server",
		"TLS_CLIENT_SECRET_NAME=" + crossplaneClientSecret,
	}
	for attempt := 1; ; attempt++ {
		err := c.run(ctx, "crossplane-init", filepath.Join(bin, "crossplane"), initEnv, "core", "init")
		if err == nil {
			break
		}
		if attempt == 5 || ctx.Err() != nil {
			return nil, err
		}
		c.logs.line("crossplane-runtime", fmt.Sprintf("crossplane core init failed (%v); running it again in 1s", err))
		time.Sleep(time.Second)
	}
	clientDir := filepath.Join(opts.Dir, "tls-client")
	if err := writeSecretFiles(ctx, cs, crossplaneClientSecret, clientDir); err != nil {
		return nil, err
	}

	if c.island, err = devenv.NewIsland(); err != nil {
		return nil, fmt.Errorf("crossplane: %w", err)
	}
	if err := c.island.Forward(mustAtoi(apiserver.Port()), apiserver.Host); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.serveRegistry(); err != nil {
		c.Stop()
		return nil, err
	}

	// The container, with the chart's environment (deployment.yaml lines 160-221): the client
	// certificate mounted at TLS_CLIENT_CERTS_DIR, the package cache at XPKG_CACHE_DIR.
	env := []string{
		"ENABLE_WEBHOOKS=false",
		"LEADER_ELECTION=false",
		"TLS_SERVER_SECRET_NAME=crossplane-tls-server",
		"TLS_CLIENT_SECRET_NAME=" + crossplaneClientSecret,
		"TLS_CLIENT_CERTS_DIR=" + clientDir,
		"XPKG_CACHE_DIR=" + filepath.Join(opts.Dir, "xpkg"),
		"PACKAGE_RUNTIME=External",
	}
	// The played providers compress AWS's minutes into a second or so, so the watch events of a
	// composed cluster's resources, which a real provider spreads over the ten minutes or more
	// EKS takes, arrive within seconds. With Crossplane's default burst of 100 events the XR's
	// watch circuit breaker would open and let one reconcile through every 30 s
	// (internal/circuit/token_bucket.go lines 120-126; cmd/crossplane/core/core.go line 117):
	// a larger burst keeps the breaker for what it is for, runaway loops.
	args := []string{"core", "start", "--circuit-breaker-burst=1000"}
	if opts.Debug {
		args = append(args, "--debug")
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "xpkg"), 0o755); err != nil {
		c.Stop()
		return nil, err
	}
	core := exec.Command(filepath.Join(bin, "crossplane"), args...)
	core.Env = append(c.podEnv(), env...)
	w := c.logs.writer("crossplane")
	core.Stdout, core.Stderr = w, w
	core.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.core, err = c.island.Start(opts.Processes, "crossplane", core); err != nil {
		c.Stop()
		return nil, fmt.Errorf("failed to start crossplane: %w", err)
	}

	// The Function, and its runtime.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		c.Stop()
		return nil, err
	}
	pkg, err := c.pushFunctionPackage(FunctionPatchAndTransform)
	if err != nil {
		c.Stop()
		return nil, err
	}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
		"metadata": map[string]any{"name": FunctionPatchAndTransform},
		"spec":     map[string]any{"package": pkg},
	}}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// The Function CRD is Crossplane's: init installed it, but it may still be establishing.
		_, err := dyn.Resource(CrossplaneFunctionGVR).Create(ctx, fn, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// From an earlier start on the same backend: the registry has a new address.
			cur, gerr := dyn.Resource(CrossplaneFunctionGVR).Get(ctx, FunctionPatchAndTransform, metav1.GetOptions{})
			if gerr != nil {
				return false, nil
			}
			_ = unstructured.SetNestedField(cur.Object, pkg, "spec", "package")
			_, err = dyn.Resource(CrossplaneFunctionGVR).Update(ctx, cur, metav1.UpdateOptions{})
		}
		return err == nil, nil
	}); err != nil {
		c.Stop()
		return nil, fmt.Errorf("failed to create the Function %s: %w", FunctionPatchAndTransform, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.runFunctions(rctx, cs, dyn)
	}()
	if err := c.waitFunction(ctx, dyn, FunctionPatchAndTransform); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// podEnv is the environment of Crossplane's containers: this process's, the kubeconfig
// (controller-runtime's GetConfig reads KUBECONFIG; in the Pod, the ServiceAccount token) and the
// Pod's namespace and ServiceAccount (the chart's downward API fields).
func (c *Crossplane) podEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "POD_NAMESPACE="+CrossplaneNamespace, "POD_SERVICE_ACCOUNT=crossplane")
}

// run runs a command to its end, like an init container.
func (c *Crossplane) run(ctx context.Context, name, binary string, env []string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(c.podEnv(), env...)
	var b bytes.Buffer
	w := io.MultiWriter(&b, c.logs.writer(name))
	cmd.Stdout, cmd.Stderr = w, w
	child, err := c.opts.Processes.Start(name, cmd)
	if err != nil {
		return fmt.Errorf("failed to start %s: %w", name, err)
	}
	if err := child.Wait(); err != nil {
		return fmt.Errorf("%s failed: %w\n%s", strings.Join(append([]string{filepath.Base(binary)}, args...), " "), err, b.String())
	}
	return nil
}

// writeSecretFiles writes every key of Secret name (in CrossplaneNamespace) as a file of dir, as
// a Secret volume does.
func writeSecretFiles(ctx context.Context, cs kubernetes.Interface, name, dir string) error {
	s, err := cs.CoreV1().Secrets(CrossplaneNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read Secret %s/%s: %w", CrossplaneNamespace, name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// serveRegistry serves an OCI registry on 127.0.0.1 outside the island, forwarded to the same
// address inside it.
func (c *Crossplane) serveRegistry() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c.registryAddr = ln.Addr().String()
	c.registry = &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = c.registry.Serve(ln) }()
	return c.island.Forward(ln.Addr().(*net.TCPAddr).Port, c.registryAddr)
}

// pushFunctionPackage builds the package of function fn from its package metadata
// (_tools/crossplane/<fn>: crossplane.yaml, then every other YAML file, e.g. input/*.yaml, in
// name order, as one package.yaml stream) and pushes it to the registry; it returns the package
// reference, tagged with the function's version (_tools/crossplane/<fn>.version).
func (c *Crossplane) pushFunctionPackage(fn string) (string, error) {
	dir := filepath.Join(c.opts.ToolsDir, "crossplane", fn)
	version := "v0.0.0"
	if raw, err := os.ReadFile(dir + ".version"); err == nil {
		version = strings.TrimSpace(string(raw))
	}
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && filepath.Base(p) != "crossplane.yaml" {
			files = append(files, p)
		}
		return err
	}); err != nil {
		return "", err
	}
	sort.Strings(files)
	var stream bytes.Buffer
	for _, f := range append([]string{filepath.Join(dir, "crossplane.yaml")}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if !bytes.HasPrefix(raw, []byte("---")) {
			stream.WriteString("---\n")
		}
		stream.Write(raw)
		if !bytes.HasSuffix(raw, []byte("\n")) {
			stream.WriteString("\n")
		}
	}
	layer, err := crane.Layer(map[string][]byte{"package.yaml": stream.Bytes()})
	if err != nil {
		return "", err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, Annotations: map[string]string{crossplaneXpkgAnnotation: "base"}})
	if err != nil {
		return "", err
	}
	ref := c.registryAddr + "/crossplane-contrib/" + fn + ":" + version
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img); err != nil {
		return "", fmt.Errorf("failed to push the package %s: %w", ref, err)
	}
	return ref, nil
}

// runFunctions plays the External package runtime for every Function it has a binary for,
// until ctx ends.
func (c *Crossplane) runFunctions(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	for {
		if err := c.syncFunctions(ctx, cs, dyn); err != nil && ctx.Err() == nil {
			c.logs.line("crossplane-runtime", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// syncFunctions runs the function of each active FunctionRevision and publishes its endpoint.
func (c *Crossplane) syncFunctions(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	revs, err := dyn.Resource(CrossplaneFunctionRevisionGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range revs.Items {
		rev := &revs.Items[i]
		fn := rev.GetLabels()[crossplaneParentLabel]
		state, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState")
		binary := filepath.Join(c.opts.ToolsDir, "bin", fn)
		if fn == "" || state != "Active" {
			continue
		}
		if _, err := os.Stat(binary); err != nil {
			continue // a function this runtime cannot run: its revision never gets an endpoint
		}
		f, err := c.startFunction(ctx, cs, rev, fn, binary)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.publishEndpoint(ctx, dyn, rev, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startFunction starts the function of rev unless it runs.
func (c *Crossplane) startFunction(ctx context.Context, cs kubernetes.Interface, rev *unstructured.Unstructured, fn, binary string) (*crossplaneFunction, error) {
	c.mu.Lock()
	f := c.functions[rev.GetName()]
	c.mu.Unlock()
	if f != nil {
		return f, nil
	}
	secret := fn + crossplaneTLSServerSuffix
	if err := ensureFunctionServerSecret(ctx, cs, secret, rev); err != nil {
		return nil, err
	}
	dir := filepath.Join(c.opts.Dir, "functions", rev.GetName())
	if err := writeSecretFiles(ctx, cs, secret, dir); err != nil {
		return nil, err
	}
	c.mu.Lock()
	port := crossplaneFunctionPort + len(c.functions)
	c.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"--address", addr, "--tls-certs-dir", dir}
	if c.opts.Debug {
		args = append(args, "--debug")
	}
	cmd := exec.Command(binary, args...)
	w := c.logs.writer(fn)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	child, err := c.island.Start(c.opts.Processes, fn, cmd)
	if err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", fn, err)
	}
	f = &crossplaneFunction{name: fn, revision: rev.GetName(), endpoint: addr, child: child}
	c.mu.Lock()
	c.functions[rev.GetName()] = f
	c.mu.Unlock()
	c.logs.line("crossplane-runtime", fmt.Sprintf("FunctionRevision %s: started %s (pid %d) on %s in Crossplane's network namespace", rev.GetName(), fn, cmd.Process.Pid, addr))
	return f, nil
}

// publishEndpoint sets rev's status.endpoint and RuntimeHealthy once the function listens.
func (c *Crossplane) publishEndpoint(ctx context.Context, dyn dynamic.Interface, rev *unstructured.Unstructured, f *crossplaneFunction) error {
	endpoint, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
	healthy := false
	conds, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
	for _, cd := range conds {
		if m, _ := cd.(map[string]any); m["type"] == "RuntimeHealthy" && m["status"] == "True" {
			healthy = true
		}
	}
	if endpoint == f.endpoint && healthy {
		return nil
	}
	// Listening: the Deployment runtime waits for the Deployment to be Available.
	if !c.island.Reachable(f.endpoint) {
		return nil
	}
	u := rev.DeepCopy()
	if err := unstructured.SetNestedField(u.Object, f.endpoint, "status", "endpoint"); err != nil {
		return err
	}
	setCrossplaneConditions(u, map[string]any{"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision", "message": ""})
	_, err := dyn.Resource(CrossplaneFunctionRevisionGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // the next pass
	}
	return err
}

// waitFunction waits until Crossplane installed Function fn and its active revision has an
// endpoint with a healthy runtime.
func (c *Crossplane) waitFunction(ctx context.Context, dyn dynamic.Interface, fn string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.core.Done():
			return false, fmt.Errorf("crossplane exited: %v", c.core.Wait())
		default:
		}
		revs, err := dyn.Resource(CrossplaneFunctionRevisionGVR).List(ctx, metav1.ListOptions{LabelSelector: crossplaneParentLabel + "=" + fn})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, rev := range revs.Items {
			endpoint, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
			caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
			if endpoint != "" && len(caps) > 0 {
				return true, nil
			}
			last = fmt.Sprintf("FunctionRevision %s: endpoint %q, capabilities %v, conditions %v", rev.GetName(), endpoint, caps, rev.Object["status"])
		}
		if len(revs.Items) == 0 {
			f, err := dyn.Resource(CrossplaneFunctionGVR).Get(ctx, fn, metav1.GetOptions{})
			if err == nil {
				last = fmt.Sprintf("no FunctionRevision yet; Function status %v", f.Object["status"])
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("Crossplane did not install the Function %s: %w (%s)", fn, err, last)
	}
	return nil
}

// Stop stops the functions and Crossplane and releases the island.
func (c *Crossplane) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	var children []*devenv.Child
	if c.core != nil {
		children = append(children, c.core)
	}
	for _, f := range c.functions {
		children = append(children, f.child)
	}
	for _, ch := range children {
		devenv.StopProcessGroup(ch.Cmd, ch.Done(), 10*time.Second)
	}
	if c.registry != nil {
		_ = c.registry.Close()
	}
	if c.island != nil {
		c.island.Close()
	}
}

// ensureFunctionServerSecret writes the TLS server Secret of a function, signed by Crossplane's
// root CA, unless it holds a certificate already (internal/initializer/tls.go lines 245-305).
func ensureFunctionServerSecret(ctx context.Context, cs kubernetes.Interface, name string, rev *unstructured.Unstructured) error {
	secrets := cs.CoreV1().Secrets(CrossplaneNamespace)
	if s, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil && len(s.Data[corev1.TLSCertKey]) > 0 {
		return nil
	}
	ca, err := secrets.Get(ctx, crossplaneRootCASecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read Crossplane's root CA: %w", err)
	}
	caCert, caKey, err := parseCrossplaneCA(ca.Data[corev1.TLSCertKey], ca.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2022),
		Subject:               pkix.Name{CommonName: "Crossplane", Organization: []string{"Crossplane"}},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now(),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: rev.GetAPIVersion(), Kind: rev.GetKind(), Name: rev.GetName(), UID: rev.GetUID(), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
		}}},
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
			"ca.crt":                ca.Data[corev1.TLSCertKey],
		},
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	} else if err != nil {
		return err
	}
	return nil
}

// parseCrossplaneCA parses the root CA Secret's certificate and PKCS#1 RSA key
// (internal/initializer/tls.go parseCertificateSigner).
func parseCrossplaneCA(certPEM, keyPEM []byte) (*x509.Certificate, *rsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("Crossplane's root CA Secret holds no PEM certificate and key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func ptrTo[T any](v T) *T { return &v }

// CrossplaneForTest runs StartCrossplane on backend for test t, with the tools of toolsDir
// (_tools), until t ends. Crossplane's and the functions' output goes to crossplane.log in a
// directory of t; when t failed, its last lines are logged.
func CrossplaneForTest(t testing.TB, backend *rest.Config, toolsDir string) *Crossplane {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "crossplane.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	xp, err := StartCrossplane(t.Context(), CrossplaneOptions{Backend: backend, ToolsDir: toolsDir, Dir: filepath.Join(dir, "crossplane"), Log: logf})
	if err != nil {
		_ = logf.Close()
		t.Fatalf("%v\n%s", err, logTail(logPath, 60))
	}
	t.Cleanup(func() {
		xp.Stop()
		_ = logf.Close()
		if t.Failed() {
			t.Logf("the last lines of Crossplane's log (%s):\n%s", logPath, logTail(logPath, 60))
		}
	})
	return xp
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
