package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestLoadBalancersAndIngressController: a LoadBalancer Service gets an address of its own that
// reaches the Service; a passthrough Ingress of the controller's class gets the controller's
// address, and a TLS client naming its host reaches the Service's own TLS server, SNI and all
// (TLS is not terminated); other hosts and classes are not served.
func TestLoadBalancersAndIngressController(t *testing.T) {
	ctx := t.Context()
	cl := framework.StartCluster(t, framework.ClusterOptions{})
	cs := kubernetes.NewForConfigOrDie(cl.Config)

	// What plays the Service's Pods: a TLS server that answers with the server name it was
	// asked for; only Service vc/vc-alice port 443 reaches it.
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served %s", r.TLS.ServerName)
	}))
	t.Cleanup(backend.Close)
	dial := func(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
		if namespace != "vc" || name != "vc-alice" || port != 443 {
			return nil, fmt.Errorf("no endpoints for %s/%s:%d", namespace, name, port)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", backend.Listener.Addr().String())
	}
	StartLoadBalancers(t, cl.Config, dial)
	ic := StartIngressController(t, cl.Config, "nginx", dial)

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vc"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vc", Name: "vc-alice"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	if _, err := cs.CoreV1().Services("vc").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lbIP string
	framework.Eventually(t, time.Minute, "the Service has a load balancer address", func() (bool, string) {
		got, err := cs.CoreV1().Services("vc").Get(ctx, "vc-alice", metav1.GetOptions{})
		if err != nil || len(got.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Sprint(err)
		}
		lbIP = got.Status.LoadBalancer.Ingress[0].IP
		return true, ""
	})
	if ip := net.ParseIP(lbIP); ip == nil || !ip.IsLoopback() || ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("load balancer address %q is not a loopback address of its own", lbIP)
	}
	client := backend.Client()
	tr := client.Transport.(*http.Transport)
	get := func(addr, serverName string) (string, error) {
		tr := tr.Clone()
		tr.TLSClientConfig.ServerName = serverName
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + serverName + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(net.JoinHostPort(lbIP, "443"), "example.com"); err != nil || got != "served example.com" {
		t.Errorf("through the load balancer: %q, %v", got, err)
	}

	ingress := func(name, class, host string, passthrough bool) {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vc", Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: ptr.To(networkingv1.PathTypeImplementationSpecific),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "vc-alice", Port: networkingv1.ServiceBackendPort{Name: "https"}}},
				}}}},
			}}},
		}
		if passthrough {
			ing.Annotations = map[string]string{SSLPassthroughAnnotation: "true"}
		}
		if _, err := cs.NetworkingV1().Ingresses("vc").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress("vc-alice", "nginx", "example.com", true)
	ingress("other-class", "public", "other.example.com", true)
	ingress("terminating", "nginx", "www.example.com", false)
	framework.Eventually(t, time.Minute, "the Ingress of the class is admitted", func() (bool, string) {
		got, err := cs.NetworkingV1().Ingresses("vc").Get(ctx, "vc-alice", metav1.GetOptions{})
		return err == nil && len(got.Status.LoadBalancer.Ingress) == 1 && got.Status.LoadBalancer.Ingress[0].IP == ic.Address, fmt.Sprint(got.Status, err)
	})
	if got, err := get(net.JoinHostPort(ic.Address, "443"), "example.com"); err != nil || got != "served example.com" {
		t.Errorf("through the ingress controller: %q, %v", got, err)
	}
	for _, host := range []string{"www.example.com", "other.example.com"} {
		if got, err := get(net.JoinHostPort(ic.Address, "443"), host); err == nil {
			t.Errorf("host %s (no passthrough route of class nginx) was served: %q", host, got)
		}
	}
	other, err := cs.NetworkingV1().Ingresses("vc").Get(ctx, "other-class", metav1.GetOptions{})
	if err != nil || len(other.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("an Ingress of another class got the controller's address: %+v, %v", other.Status, err)
	}
}
