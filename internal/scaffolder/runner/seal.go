package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	ssv1alpha1 "github.com/bitnami-labs/sealed-secrets/pkg/apis/sealedsecrets/v1alpha1"
	"github.com/bitnami-labs/sealed-secrets/pkg/kubeseal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The target's sealed-secrets controller, as the tree installs it: kubeseal's defaults
// (github.com/bitnami-labs/sealed-secrets v0.32.2, cmd/kubeseal/main.go: --controller-name
// sealed-secrets-controller, --controller-namespace kube-system), and its certificate's path on
// the controller's HTTP port (pkg/kubeseal/kubeseal.go, openCertCluster: the service proxy's
// GET .../services/<name>:<first port's name>/proxy/v1/cert.pem).
const (
	ControllerName      = "sealed-secrets-controller"
	ControllerNamespace = "kube-system"
	certPath            = "/v1/cert.pem"
	// maxCertBytes bounds the certificate read from the target (a PEM certificate is ~2 KB).
	maxCertBytes = 64 << 10
)

// controllerState says whether the controller's Deployment is Available, and if not what it
// shows.
func controllerState(ctx context.Context, cs kubernetes.Interface) (bool, string, error) {
	d, err := cs.AppsV1().Deployments(ControllerNamespace).Get(ctx, ControllerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("Deployment %s/%s does not exist yet (Flux installs it from the infrastructure layer)", ControllerNamespace, ControllerName), nil
	}
	if err != nil {
		return false, "", err
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			if c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
			return false, fmt.Sprintf("Deployment %s/%s is not Available: %s", ControllerNamespace, ControllerName, c.Message), nil
		}
	}
	return false, fmt.Sprintf("Deployment %s/%s reports no availability yet", ControllerNamespace, ControllerName), nil
}

// fetchCert reads the controller's public certificate through the target API server's service
// proxy, as kubeseal --fetch-cert does, and parses it (an expired one is refused).
func fetchCert(ctx context.Context, cs kubernetes.Interface) (*rsa.PublicKey, error) {
	svc, err := cs.CoreV1().Services(ControllerNamespace).Get(ctx, ControllerName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to read Service %s/%s: %w", ControllerNamespace, ControllerName, err)
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("Service %s/%s has no ports", ControllerNamespace, ControllerName)
	}
	port := svc.Spec.Ports[0].Name
	if port == "" {
		port = fmt.Sprint(svc.Spec.Ports[0].Port)
	}
	rc, err := cs.CoreV1().Services(ControllerNamespace).ProxyGet("http", ControllerName, port, certPath, nil).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch the sealing certificate through the service proxy: %w", err)
	}
	defer func() { _ = rc.Close() }()
	raw, err := io.ReadAll(io.LimitReader(rc, maxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read the sealing certificate: %w", err)
	}
	if len(raw) > maxCertBytes {
		return nil, fmt.Errorf("the sealing certificate is larger than %d bytes", maxCertBytes)
	}
	key, err := kubeseal.ParseKey(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the target's sealing certificate is not usable: %w", err)
	}
	return key, nil
}

// Credential is one Secret the second pass seals into the apps layer.
type Credential struct {
	// Namespace and Name of the Secret the controller makes of it.
	Namespace, Name string
	// Type of that Secret.
	Type corev1.SecretType
	// Data is its content: fresh values, or the registry pull secret handed to the run.
	Data map[string][]byte
}

// randomToken is n random bytes, hex-encoded.
func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// seal encrypts c for the controller holding key: a SealedSecret of strict scope (only a Secret
// of exactly this name and namespace can be made of it), encoded as YAML.
func seal(key *rsa.PublicKey, c Credential) ([]byte, error) {
	if c.Namespace == "" || c.Name == "" {
		return nil, errors.New("a sealed credential needs a namespace and a name")
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Type:       c.Type,
		Data:       c.Data,
	}
	ss, err := ssv1alpha1.NewSealedSecret(scheme.Codecs, key, s)
	if err != nil {
		return nil, fmt.Errorf("failed to seal %s/%s: %w", c.Namespace, c.Name, err)
	}
	ss.TypeMeta = metav1.TypeMeta{APIVersion: ssv1alpha1.SchemeGroupVersion.String(), Kind: "SealedSecret"}
	// The encoder writes the fields' zero values; the object needs none of them.
	obj := map[string]any{
		"apiVersion": ss.APIVersion,
		"kind":       ss.Kind,
		"metadata":   map[string]any{"name": ss.Name, "namespace": ss.Namespace},
		"spec": map[string]any{
			"encryptedData": ss.Spec.EncryptedData,
			"template": map[string]any{
				"metadata": map[string]any{"name": ss.Name, "namespace": ss.Namespace},
				"type":     string(c.Type),
			},
		},
	}
	return yaml.Marshal(obj)
}

// pollUntil calls check every interval until it reports done, ctx ends or timeout passes;
// report gets what check says while waiting (when it changed).
func pollUntil(ctx context.Context, interval, timeout time.Duration, check func(context.Context) (bool, string, error), report func(string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, msg, err := check(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			msg = last // the deadline's error says nothing about the target
		case err != nil:
			msg = err.Error()
		case done:
			return nil
		}
		if msg != last {
			report(msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "no answer"
			}
			return fmt.Errorf("gave up after %s: %s", timeout, last)
		case <-time.After(interval):
		}
	}
}
