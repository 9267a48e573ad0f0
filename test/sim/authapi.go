package sim

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Where authapi lives on a target and how its bootstrap endpoint is called: the defaults
// internal/authapi documents (the seed names only the endpoint, the Secret and its key).
const (
	AuthAPINamespace     = "kubeopera"
	AuthAPIService       = "authapi"
	AuthAPIPortName      = "http"
	AuthAPISecret        = "authapi-secrets"
	AuthAPISecretKey     = "INTERNAL_API_KEY"
	AuthAPIKeyHeader     = "X-Internal-Api-Key"
	AuthAPIBootstrapPath = "/internal/bootstrap/super-admin"
	// AuthAPIPod is the Pod the actor stands in for, labelled app=authapi.
	AuthAPIPod = "authapi-0"
)

// authAPIServiceWait bounds how long Run waits for authapi's Service (Flux applies it).
const authAPIServiceWait = 5 * time.Minute

// AuthAPI plays authapi's Pod on a target cluster, and (unless Unsealed) the sealed-secrets
// controller that unseals its Secret there (docs/hostcluster.md#admin-bootstrap). The target is a real kube-apiserver without a
// kubelet, so this process serves what the Pod would, and writes what the kubelet, the
// endpoints controller and the sealed-secrets controller would write, nothing more:
//
//   - authapi: POST /internal/bootstrap/super-admin with {"email", "username", "password"} and the
//     X-Internal-Api-Key header: 401 unless the header is the key of authapi-secrets
//     (constant-time compare), 400 naming an empty or malformed field, else the account is
//     upserted: 201 the first time an email is seen, 200 after, {"email", "username", "created"}.
//     It listens on a free port of an address of the pod network, in a network namespace of its
//     own reached over a veth pair (podNet, as FluxPods gives the sealed-secrets controller's
//     Pod; Endpoints may not hold loopback addresses); without root, on a non-loopback IPv4
//     address of this machine instead (NonLoopbackIPv4), which other hosts could reach.
//   - sealed-secrets, unless Unsealed (then the real controller unseals the tree's SealedSecret
//     and the actor waits for the Secret, as authapi's Pod waits for what it mounts): once the
//     Service authapi exists in Namespace (Flux applies it from the tree), Secret
//     authapi-secrets with a random INTERNAL_API_KEY (an existing key is kept, as an unsealed
//     Secret keeps its value).
//   - the kubelet: Pod authapi-0 (app=authapi, container port named http = this server's port)
//     with status Running, podIP(s) = this server's address, Ready; and, as
//     kube-controller-manager's serviceaccount controller would, ServiceAccount default first,
//     which the ServiceAccount admission plugin requires of every Pod.
//   - the endpoints controller: Endpoints authapi with this address, targetRef to the Pod, port
//     named http = this server's port (the Service's targetPort "http" resolved on the Pod).
//
// The API server's service proxy only uses an Endpoints address whose targetRef is a Pod of the
// same namespace with that IP in status.podIPs (kubernetes v1.36.3,
// pkg/registry/core/service/storage/storage.go, ResourceLocation and isValidAddress, lines
// 423-520), and takes the port from the Endpoints port named like the requested service port:
// hence the Pod, its status and the Endpoints.
type AuthAPI struct {
	// Target is the target cluster.
	Target *rest.Config
	// Namespace of the Service, Secret, Pod and Endpoints; default kubeopera.
	Namespace string
	// Address is the IPv4 address to serve on; default an address of the pod network in a
	// network namespace of its own (podNet; as root), else the first non-loopback IPv4 address
	// of an interface that is up.
	Address string
	// Unsealed: authapi-secrets comes from the GitOps tree's SealedSecret, which the real
	// sealed-secrets controller on the target unseals; the actor waits for it and plays
	// sealed-secrets no more. Without it the actor writes the Secret as that controller would.
	Unsealed bool

	once         sync.Once
	ready        chan struct{}
	readyOnce    sync.Once
	mu           sync.Mutex
	key          string
	addr         string
	calls        int
	callsFor     map[string]int // accepted requests by email
	refused      int
	lastEmail    string
	lastUsername string
	accounts     map[string]string
}

func (a *AuthAPI) init() {
	a.once.Do(func() {
		a.ready = make(chan struct{})
		a.accounts = map[string]string{}
		a.callsFor = map[string]int{}
	})
}

// Ready is closed once the service proxy can reach this server: Secret, Pod and Endpoints
// written.
func (a *AuthAPI) Ready() <-chan struct{} {
	a.init()
	return a.ready
}

// Calls is how many bootstrap requests were accepted (authorized and valid).
func (a *AuthAPI) Calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// CallsFor is how many accepted bootstrap requests were for email, and the username of its
// account ("" when none was made): what a test counts when other tests share the server.
func (a *AuthAPI) CallsFor(email string) (int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.callsFor[email], a.accounts[email]
}

// Refused is how many bootstrap requests had a wrong or missing key.
func (a *AuthAPI) Refused() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// Last is the account of the last accepted request.
func (a *AuthAPI) Last() (email, username string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastEmail, a.lastUsername
}

// Key is the INTERNAL_API_KEY in use, once Run wrote or read the Secret.
func (a *AuthAPI) Key() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.key
}

// Addr is the host:port served, once Run listens.
func (a *AuthAPI) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Run serves authapi and writes its objects on the target, then serves until ctx ends (nil) or
// the server fails. Run again (a restarted Pod) serves on a new port, rewrites the Pod and the
// Endpoints, and keeps the key.
func (a *AuthAPI) Run(ctx context.Context) error {
	a.init()
	if a.Target == nil {
		return errors.New("the authapi actor needs a target")
	}
	ns := a.Namespace
	if ns == "" {
		ns = AuthAPINamespace
	}
	ip := a.Address
	var ln net.Listener
	var err error
	switch {
	case ip == "" && os.Geteuid() == 0:
		n, err := startPodNet(ctx, nil, "authapi", a.Target.Host)
		if err != nil {
			return fmt.Errorf("authapi's Pod network: %w", err)
		}
		defer n.stop()
		ip = n.ip
		ln, err = listenIn(n.netns, net.JoinHostPort(ip, "0"))
		if err != nil {
			return fmt.Errorf("authapi cannot listen on %s in its Pod: %w", ip, err)
		}
	case ip == "":
		if ip, err = NonLoopbackIPv4(); err != nil {
			return err
		}
		fallthrough
	default:
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); err != nil {
			return fmt.Errorf("authapi cannot listen on %s: %w", ip, err)
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	a.mu.Lock()
	a.addr = ln.Addr().String()
	a.mu.Unlock()

	mux := http.NewServeMux()
	mux.HandleFunc("POST "+AuthAPIBootstrapPath, a.bootstrap)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	if err := a.install(ctx, ns, ip, int32(port)); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.readyOnce.Do(func() { close(a.ready) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return fmt.Errorf("authapi stopped serving: %w", err)
	}
}

// install writes, in order, what sealed-secrets, the serviceaccount controller, the kubelet and
// the endpoints controller would.
func (a *AuthAPI) install(ctx context.Context, ns, ip string, port int32) error {
	cs, err := kubernetes.NewForConfig(a.Target)
	if err != nil {
		return err
	}
	var svc *corev1.Service
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, authAPIServiceWait, true, func(ctx context.Context) (bool, error) {
		svc, err = cs.CoreV1().Services(ns).Get(ctx, AuthAPIService, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no Service %s/%s within %s (it comes with the GitOps tree): %w", ns, AuthAPIService, authAPIServiceWait, err)
	}
	hasPort := false
	for _, p := range svc.Spec.Ports {
		hasPort = hasPort || p.Name == AuthAPIPortName
	}
	if !hasPort {
		return fmt.Errorf("Service %s/%s has no port named %s", ns, AuthAPIService, AuthAPIPortName)
	}

	var key string
	if a.Unsealed {
		key, err = a.awaitSecret(ctx, cs, ns)
	} else {
		key, err = a.ensureSecret(ctx, cs, ns)
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.key = key
	a.mu.Unlock()

	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create ServiceAccount %s/default: %w", ns, err)
	}
	pod, err := a.ensurePod(ctx, cs, ns, ip, port)
	if err != nil {
		return err
	}
	eps := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: AuthAPIService, Namespace: ns, Labels: map[string]string{"app": "authapi"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{
				IP:        ip,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
			}},
			Ports: []corev1.EndpointPort{{Name: AuthAPIPortName, Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	endpoints := cs.CoreV1().Endpoints(ns) //nolint:staticcheck // deprecated since v1.33, but the service proxy reads Endpoints, not EndpointSlices
	old, err := endpoints.Get(ctx, AuthAPIService, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = endpoints.Create(ctx, eps, metav1.CreateOptions{})
	case err == nil:
		old.Labels, old.Subsets = eps.Labels, eps.Subsets
		_, err = endpoints.Update(ctx, old, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("failed to write Endpoints %s/%s: %w", ns, AuthAPIService, err)
	}
	return nil
}

// awaitSecret waits for authapi-secrets with its key, as authapi's Pod waits for the Secret it
// mounts, and returns the key.
func (a *AuthAPI) awaitSecret(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	var key string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, authAPIServiceWait, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, AuthAPISecret, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		key = string(s.Data[AuthAPISecretKey])
		return key != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("no Secret %s/%s with key %s within %s (the sealed-secrets controller unseals it from the GitOps tree): %w", ns, AuthAPISecret, AuthAPISecretKey, authAPIServiceWait, err)
	}
	return key, nil
}

// ensureSecret keeps the key of an existing authapi-secrets, or writes a random one.
func (a *AuthAPI) ensureSecret(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	secrets := cs.CoreV1().Secrets(ns)
	s, err := secrets.Get(ctx, AuthAPISecret, metav1.GetOptions{})
	if err == nil && len(s.Data[AuthAPISecretKey]) > 0 {
		return string(s.Data[AuthAPISecretKey]), nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	key := base64.RawURLEncoding.EncodeToString(b)
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: AuthAPISecret, Namespace: ns},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{AuthAPISecretKey: []byte(key)},
		}, metav1.CreateOptions{})
	case err == nil:
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[AuthAPISecretKey] = []byte(key)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("failed to write Secret %s/%s: %w", ns, AuthAPISecret, err)
	}
	return key, nil
}

// ensurePod (re)creates authapi-0 for this server's port (container ports are immutable) and
// reports it running and ready at ip, as the kubelet does through the status subresource.
func (a *AuthAPI) ensurePod(ctx context.Context, cs kubernetes.Interface, ns, ip string, port int32) (*corev1.Pod, error) {
	pods := cs.CoreV1().Pods(ns)
	if err := pods.Delete(ctx, AuthAPIPod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to replace Pod %s/%s: %w", ns, AuthAPIPod, err)
	}
	// An unscheduled Pod goes at once; wait until its name is free.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, AuthAPIPod, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return nil, fmt.Errorf("Pod %s/%s is not gone: %w", ns, AuthAPIPod, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: AuthAPIPod, Namespace: ns, Labels: map[string]string{"app": "authapi"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "authapi",
				Image: "ghcr.io/kubeopera/authapi:actor",
				Ports: []corev1.ContainerPort{{Name: AuthAPIPortName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			}},
		},
	}
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to create Pod %s/%s: %w", ns, AuthAPIPod, err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "authapi", Image: pod.Spec.Containers[0].Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to report Pod %s/%s running: %w", ns, AuthAPIPod, err)
	}
	return pod, nil
}

// maxBootstrapBody bounds a bootstrap request.
const maxBootstrapBody = 64 << 10

func (a *AuthAPI) bootstrap(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	if key == "" {
		respondJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "starting"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(AuthAPIKeyHeader)), []byte(key)) != 1 {
		a.mu.Lock()
		a.refused++
		a.mu.Unlock()
		respondJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid internal API key"})
		return
	}
	var req struct {
		Email    string `json:"email"`
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBootstrapBody)).Decode(&req); err != nil {
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON body"})
		return
	}
	switch {
	case strings.TrimSpace(req.Email) == "":
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "email is required"})
		return
	case !strings.Contains(req.Email, "@"):
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "email " + strconv.Quote(req.Email) + " is not an email address"})
		return
	case strings.TrimSpace(req.Username) == "":
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "username is required"})
		return
	case len(req.Password) < 12:
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "password must have at least 12 characters"})
		return
	}
	a.mu.Lock()
	_, existed := a.accounts[req.Email]
	a.accounts[req.Email] = req.Username
	a.calls++
	a.callsFor[req.Email]++
	a.lastEmail, a.lastUsername = req.Email, req.Username
	a.mu.Unlock()
	code := http.StatusCreated
	if existed {
		code = http.StatusOK
	}
	respondJSON(w, code, map[string]any{"email": req.Email, "username": req.Username, "created": !existed})
}

// NonLoopbackIPv4 is the first IPv4 address of an interface that is up and is neither loopback
// nor link-local: an address the API server can proxy to and Endpoints may hold.
func NonLoopbackIPv4() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, addr := range addrs {
			ipn, ok := addr.(*net.IPNet)
			if !ok {
				continue
			}
			ip := ipn.IP.To4()
			if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
				continue
			}
			return ip.String(), nil
		}
	}
	return "", errors.New("this machine has no non-loopback IPv4 address for authapi's Endpoints")
}

func respondJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
