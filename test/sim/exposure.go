package sim

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceDialer reaches port of backend Service namespace/name from this process, as a node
// reaches a Service through kube-proxy: whatever plays the Service's Pods says how (a vCluster
// Pod played by VClusterPods listens in its own network namespace). nil: the actors below give
// addresses but refuse every connection.
type ServiceDialer func(ctx context.Context, namespace, name string, port int32) (net.Conn, error)

// LoadBalancers plays the backend's load balancer controller for Services of type LoadBalancer
// (the cloud provider's service controller, k8s.io/cloud-provider controllers/service/
// controller.go: syncLoadBalancerIfNeeded asks the cloud to EnsureLoadBalancer and patches the
// Service's status.loadBalancer with the ingress points the cloud returned). Its "cloud" is this
// machine: each Service gets its own loopback address (127.x.y.z) as its ingress IP, and a
// listener on that address at every port of the Service forwards to the Service through dial,
// as a cloud load balancer forwards to the nodes' kube-proxy.
type LoadBalancers struct {
	cs   kubernetes.Interface
	dial ServiceDialer
	logf func(format string, args ...any)

	mu        sync.Mutex
	listeners map[string][]net.Listener // namespace/name -> its listeners
}

// NewLoadBalancers returns the load balancer controller of backend, reaching Services through
// dial; logf (nil: discard) hears what it could not do. Run runs it.
func NewLoadBalancers(backend *rest.Config, dial ServiceDialer, logf func(format string, args ...any)) (*LoadBalancers, error) {
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &LoadBalancers{cs: cs, dial: dial, logf: logf, listeners: map[string][]net.Listener{}}, nil
}

// Run serves until ctx ends, then closes every listener.
func (lb *LoadBalancers) Run(ctx context.Context) {
	// The service controller is driven by a Service informer; a short poll is the same to the
	// Services it serves.
	_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		lb.sync(ctx)
		return false, nil
	})
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, ls := range lb.listeners {
		for _, l := range ls {
			_ = l.Close()
		}
	}
}

// StartLoadBalancers runs the load balancer controller against the backend until the test ends.
func StartLoadBalancers(t *testing.T, backend *rest.Config, dial ServiceDialer) *LoadBalancers {
	t.Helper()
	lb, err := NewLoadBalancers(backend, dial, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); lb.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return lb
}

// sync gives every LoadBalancer Service without an ingress point an address.
func (lb *LoadBalancers) sync(ctx context.Context) {
	svcs, err := lb.cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		lb.mu.Lock()
		_, served := lb.listeners[key]
		lb.mu.Unlock()
		if served {
			continue
		}
		ip, ls, err := listenLoopback(svc.Spec.Ports)
		if err != nil {
			lb.logf("load balancer for Service %s: %v", key, err)
			continue
		}
		for j, l := range ls {
			go serveForward(l, func(ctx context.Context) (net.Conn, error) {
				if lb.dial == nil {
					return nil, errors.New("nothing serves the Service")
				}
				return lb.dial(ctx, svc.Namespace, svc.Name, svc.Spec.Ports[j].Port)
			})
		}
		lb.mu.Lock()
		lb.listeners[key] = ls
		lb.mu.Unlock()
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		if _, err := lb.cs.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			lb.logf("load balancer for Service %s: status: %v", key, err)
			lb.mu.Lock()
			delete(lb.listeners, key)
			lb.mu.Unlock()
			for _, l := range ls {
				_ = l.Close()
			}
		}
	}
}

// IngressController plays ingress-nginx run with --enable-ssl-passthrough and
// --publish-status-address for the Ingresses of one class:
//   - Status: every Ingress of its class gets the published address as
//     status.loadBalancer.ingress (ingress-nginx internal/ingress/status/status.go, statusSync).
//   - TLS passthrough: for Ingresses annotated nginx.ingress.kubernetes.io/ssl-passthrough:
//     "true", a connection to port 443 is routed by the host name of its TLS ClientHello (SNI) to
//     the Service of the rule for that host, without terminating TLS (ingress-nginx
//     internal/ingress/controller/tcp.go, TCPProxy.Handle: read the ClientHello, parse the host
//     name, dial the passthrough server of that host, replay what was read, then copy both ways).
//     A host no passthrough Ingress names goes to ingress-nginx's default server, which answers
//     with its own certificate; here it is refused.
//
// Its address is a loopback address of its own (127.x.y.z:443), which the platform's wildcard
// DNS record would name: a test client resolves the vCluster's host to it (framework.Kubectl's
// hosts).
type IngressController struct {
	// Address is the published address, where it listens on port 443.
	Address string

	class string
	cs    kubernetes.Interface
	dial  ServiceDialer

	mu     sync.Mutex
	routes map[string]route // host -> Service port
}

type route struct {
	namespace, service string
	port               networkingv1.ServiceBackendPort
}

// SSLPassthroughAnnotation is ingress-nginx's annotation for TLS passthrough (ingress-nginx
// internal/ingress/annotations/sslpassthrough).
const SSLPassthroughAnnotation = "nginx.ingress.kubernetes.io/ssl-passthrough"

// StartIngressController runs the ingress controller of class against the backend until the
// test ends.
func StartIngressController(t *testing.T, backend *rest.Config, class string, dial ServiceDialer) *IngressController {
	t.Helper()
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		t.Fatal(err)
	}
	ip, ls, err := listenLoopback([]corev1.ServicePort{{Port: 443}})
	if err != nil {
		t.Fatal(err)
	}
	ic := &IngressController{Address: ip, class: class, cs: cs, dial: dial, routes: map[string]route{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			ic.sync(ctx, t)
			return false, nil
		})
	}()
	go ic.serve(ls[0])
	t.Cleanup(func() {
		cancel()
		<-done
		_ = ls[0].Close()
	})
	return ic
}

// sync publishes the address on the class's Ingresses and learns their passthrough routes.
func (ic *IngressController) sync(ctx context.Context, t *testing.T) {
	list, err := ic.cs.NetworkingV1().Ingresses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	routes := map[string]route{}
	for i := range list.Items {
		ing := &list.Items[i]
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != ic.class {
			continue
		}
		if ing.Annotations[SSLPassthroughAnnotation] == "true" {
			for _, rule := range ing.Spec.Rules {
				if rule.HTTP == nil || rule.Host == "" {
					continue
				}
				for _, p := range rule.HTTP.Paths {
					if p.Backend.Service != nil {
						routes[rule.Host] = route{ing.Namespace, p.Backend.Service.Name, p.Backend.Service.Port}
					}
				}
			}
		}
		if len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].IP == ic.Address {
			continue
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: ic.Address}}
		if _, err := ic.cs.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
			t.Logf("ingress controller: status of Ingress %s/%s: %v", ing.Namespace, ing.Name, err)
		}
	}
	ic.mu.Lock()
	ic.routes = routes
	ic.mu.Unlock()
}

// serve passes each connection through to the Service its ClientHello's host name routes to.
func (ic *IngressController) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			host, hello, err := readClientHello(conn)
			if err != nil {
				return
			}
			_ = conn.SetReadDeadline(time.Time{})
			ic.mu.Lock()
			r, ok := ic.routes[host]
			ic.mu.Unlock()
			if !ok || ic.dial == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			port, err := ic.servicePort(ctx, r)
			var upstream net.Conn
			if err == nil {
				upstream, err = ic.dial(ctx, r.namespace, r.service, port)
			}
			cancel()
			if err != nil {
				return
			}
			defer upstream.Close()
			if _, err := upstream.Write(hello); err != nil {
				return
			}
			pipe(conn, upstream)
		}()
	}
}

// servicePort resolves a backend's port (by number, or by the name of a Service port).
func (ic *IngressController) servicePort(ctx context.Context, r route) (int32, error) {
	if r.port.Number != 0 {
		return r.port.Number, nil
	}
	svc, err := ic.cs.CoreV1().Services(r.namespace).Get(ctx, r.service, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == r.port.Name {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("Service %s/%s has no port %q", r.namespace, r.service, r.port.Name)
}

// errHelloRead stops the handshake once the ClientHello is read.
var errHelloRead = errors.New("client hello read")

// readClientHello reads a TLS ClientHello from conn and returns its server name and the bytes
// read, to be replayed to the upstream.
func readClientHello(conn net.Conn) (string, []byte, error) {
	var read bytes.Buffer
	var host string
	err := tls.Server(helloConn{io.TeeReader(conn, &read)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			host = h.ServerName
			return nil, errHelloRead
		},
	}).Handshake()
	if host == "" {
		return "", nil, fmt.Errorf("no server name in the ClientHello: %v", err)
	}
	return host, read.Bytes(), nil
}

// helloConn is a net.Conn that only reads, for parsing a ClientHello.
type helloConn struct{ r io.Reader }

func (c helloConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (helloConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (helloConn) Close() error                     { return nil }
func (helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (helloConn) SetDeadline(time.Time) error      { return nil }
func (helloConn) SetReadDeadline(time.Time) error  { return nil }
func (helloConn) SetWriteDeadline(time.Time) error { return nil }

// serveForward forwards every connection accepted on l to what dial reaches.
func serveForward(l net.Listener, dial func(context.Context) (net.Conn, error)) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			upstream, err := dial(ctx)
			cancel()
			if err != nil {
				return
			}
			defer upstream.Close()
			pipe(conn, upstream)
		}()
	}
}

// pipe copies both ways until either side ends.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// listenLoopback listens on an address of its own in 127.0.0.0/8 (not 127.0.0.1: that is
// every other test server's), at every port, and returns the address.
func listenLoopback(ports []corev1.ServicePort) (string, []net.Listener, error) {
	for attempt := 0; attempt < 50; attempt++ {
		ip := net.IPv4(127, byte(1+rand.IntN(254)), byte(1+rand.IntN(254)), byte(1+rand.IntN(254))).String()
		var ls []net.Listener
		var err error
		for _, p := range ports {
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))); err != nil {
				break
			}
			ls = append(ls, l)
		}
		if err == nil {
			return ip, ls, nil
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return "", nil, err
		}
	}
	return "", nil, errors.New("no free loopback address")
}
