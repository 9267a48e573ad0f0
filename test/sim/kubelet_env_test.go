package sim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestContainerEnvResourceFieldRef: resourceFieldRef values as the kubelet computes them
// (ExtractContainerResourceValue: the quantity over the divisor, rounded up), the chart of the
// sealed-secrets controller's GOMAXPROCS and GOMEMLIMIT among them; an unset limit (the node's
// allocatable) is refused, not guessed.
func TestContainerEnvResourceFieldRef(t *testing.T) {
	c := &corev1.Container{Name: "controller", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}}
	ref := func(name, res, divisor string) corev1.EnvVar {
		fs := &corev1.ResourceFieldSelector{Resource: res}
		if divisor != "" {
			fs.Divisor = resource.MustParse(divisor)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: fs}}
	}
	c.Env = []corev1.EnvVar{ref("GOMAXPROCS", "limits.cpu", "1"), ref("GOMEMLIMIT", "limits.memory", ""),
		ref("MILLIS", "requests.cpu", "1m"), ref("MIB", "limits.memory", "1Mi")}
	env, err := containerEnv(c, "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"GOMAXPROCS": "2", "GOMEMLIMIT": "134217728", "MILLIS": "100", "MIB": "128"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	c.Env = []corev1.EnvVar{ref("X", "requests.memory", "")}
	if _, err := containerEnv(c, "kube-system"); err == nil {
		t.Error("a resourceFieldRef of a request the container does not set was played")
	}
}
