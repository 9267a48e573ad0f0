package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// What RunnerJobs and FluxPods both play of the kubelet. Sources are k8s.io/kubernetes v1.36.3.

// tokenExpirationSeconds is what the kube-api-access volume asks for
// (plugin/pkg/admission/serviceaccount/admission.go:493, WarnOnlyBoundTokenExpirationSeconds).
const tokenExpirationSeconds = 3607

// writePodKubeconfig writes to path a kubeconfig for admin's server (its CA: CAData, else CAFile
// read; ServerName) holding a token of ServiceAccount sa ("default" when empty, as the
// ServiceAccount admission plugin sets it: admission.go:46) in namespace. The token is requested as the kubelet
// requests the kube-api-access volume's (pkg/volume/projected/projected.go:334-345): a
// TokenRequest of expirationSeconds 3607 bound to pod. A process here cannot have the files
// rest.InClusterConfig reads, so the container gets the token as KUBECONFIG. pod nil (FluxPods
// has no Pod objects): the token is bound to nothing and lasts ttl.
func writePodKubeconfig(ctx context.Context, admin *rest.Config, namespace, sa string, pod *corev1.Pod, ttl time.Duration, path string) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if sa == "" {
		sa = "default"
	}
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))}
	if pod != nil {
		spec = authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds),
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to request a token of ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca, TLSServerName: admin.ServerName, InsecureSkipTLSVerify: admin.Insecure}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "pod", Namespace: namespace}
	cfg.CurrentContext = "pod"
	return clientcmd.WriteToFile(*cfg, path)
}

// podSandbox makes dir/home and dir/tmp and returns what a container has before its env: PATH
// from its image (this process's here), HOME and TMPDIR its own home and /tmp (directories in dir).
func podSandbox(dir string) (map[string]string, error) {
	for _, d := range []string{"home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return map[string]string{"PATH": os.Getenv("PATH"), "HOME": filepath.Join(dir, "home"), "TMPDIR": filepath.Join(dir, "tmp")}, nil
}

// containerEnv is the environment makeEnvironmentVariables (pkg/kubelet/kubelet_pods.go:734)
// builds from c.Env, for what the actors' Pods use: a value, with $(VAR) references to the
// entries before it expanded once (lines 849-852), valueFrom fieldRef metadata.namespace
// (lines 856-857, podFieldSelectorRuntimeValue line 989), and valueFrom resourceFieldRef
// limits/requests of cpu and memory when the container sets them (lines 861-866,
// containerResourceRuntimeValue -> pkg/api/v1/resource/helpers.go ExtractContainerResourceValue:
// the quantity divided by the divisor, default 1, rounded up; cpu in millis). An unset limit
// would be the node's allocatable, which no Node here has: not played. Service links' variables
// are not played. envFrom and every other valueFrom are not played either: the error names them.
func containerEnv(c *corev1.Container, namespace string) (map[string]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("envFrom")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.Value != "" || e.ValueFrom == nil:
			env[e.Name] = expandVars(e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := containerResourceValue(c, e.ValueFrom.ResourceFieldRef)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env[e.Name] = v
		default:
			return nil, fmt.Errorf("env %s from a source other than fieldRef metadata.namespace", e.Name)
		}
	}
	return env, nil
}

// containerResourceValue is ExtractContainerResourceValue for cpu and memory limits and requests
// that c sets (see containerEnv).
func containerResourceValue(c *corev1.Container, fs *corev1.ResourceFieldSelector) (string, error) {
	if fs.ContainerName != "" && fs.ContainerName != c.Name {
		return "", fmt.Errorf("resourceFieldRef of container %s", fs.ContainerName)
	}
	kind, name, _ := strings.Cut(fs.Resource, ".")
	list := map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests}[kind]
	q, ok := list[corev1.ResourceName(name)]
	if !ok || (name != "cpu" && name != "memory") {
		return "", fmt.Errorf("resourceFieldRef %s of a container that does not set it (or not cpu or memory)", fs.Resource)
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// expandVars is expansion.Expand(s, MappingFuncFor(env)) (third_party/forked/golang/expansion/
// expand.go:15-105): $(NAME) becomes env[NAME] or stays as written when NAME is undefined, $$
// becomes $, and an unclosed $( is copied and scanning goes on after it.
func expandVars(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch end := strings.IndexByte(s[i+1:], ')'); {
		case s[i+1] == '$':
			b.WriteByte('$')
			i++
		case s[i+1] == '(' && end > 0:
			name := s[i+2 : i+1+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 1 + end
		case s[i+1] == '(':
			b.WriteString("$(")
			i++
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// environ is env as a process environment, in no particular order, as the kubelet appends its
// map of variables (kubelet_pods.go:968-971).
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// killGrace is the grace period killContainer gives a container (setTerminationGracePeriod,
// pkg/kubelet/kuberuntime/kuberuntime_container.go:1434-1453): the Pod's
// deletionGracePeriodSeconds once it is deleted, else spec.terminationGracePeriodSeconds (which
// the API server defaults to 30: pkg/apis/core/v1/defaults.go:225-227).
func killGrace(deletionGracePeriodSeconds *int64, spec *corev1.PodSpec) time.Duration {
	if deletionGracePeriodSeconds != nil {
		return time.Duration(*deletionGracePeriodSeconds) * time.Second
	}
	return time.Duration(ptr.Deref(spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
}

// stopContainer stops a container's process as killContainer
// (pkg/kubelet/kuberuntime/kuberuntime_container.go:861) does through the runtime's
// StopContainer: SIGTERM to its main process and, if it has not exited after grace, SIGKILL to
// all its processes (its process group here: cmd must be started with Setpgid). done is closed
// once the process has exited.
func stopContainer(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// exitCode is the exit code the runtime reports for a process that ended with err (from
// cmd.Wait): its status, or 128 + the signal that killed it (containerd's reaper, exitStatus with
// exitSignalOffset 128): 143 for SIGTERM, 137 for SIGKILL.
func exitCode(err error) int {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return 0
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}
