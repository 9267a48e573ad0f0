// Package externalid derives the external ID the platform sends with every sts:AssumeRole it makes
// for a workspace (the terraform-runner's, for provisioning runs, and the manager's, for EKS
// tokens): HMAC-SHA256 of the workspace's logical cluster name under an installation key kept on
// the backend. A tenant puts their workspace's value into the trust policy of the role their
// credential names (condition sts:ExternalId); since no tenant can choose or learn another
// workspace's value, naming another tenant's role ARN gets AccessDenied from STS instead of that
// account (the confused deputy problem, IAM User Guide: "The confused deputy problem" and "Access
// to AWS accounts owned by third parties", id_roles_common-scenarios_third-party.html).
package externalid

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// Prefix starts every external ID, so a tenant (and CloudTrail) recognises the platform's.
	Prefix = "kubeopera-"
	// KeyBytes is the size of the installation key the manager generates.
	KeyBytes = 32
	// KeyField is the installation key's field in its Secret.
	KeyField = "key"
	// DefaultNamespace and DefaultName locate the installation key's Secret on the backend.
	DefaultNamespace = "kubeopera-system"
	DefaultName      = "kubeopera-external-id-key"
	// ManagedByLabel marks the Secret as the manager's.
	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// For returns the external ID of workspace logicalCluster under key: Prefix and the 64 hex
// digits of HMAC-SHA256(key, logicalCluster). That is 74 characters of [a-z0-9-], within
// sts:AssumeRole's ExternalId rules (2 to 1224 characters of [\w+=,.@:/-], API_AssumeRole.html).
func For(key []byte, logicalCluster string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(logicalCluster))
	return Prefix + hex.EncodeToString(mac.Sum(nil))
}

// Key is the installation key, kept in Secret Name on the backend. The first Get of any manager
// replica creates it when absent (create-first: of replicas racing, one Create wins and the
// others read the winner's key), immutable, so every replica and every restart derives the same
// external IDs. Deleting the Secret changes every workspace's external ID: tenants would have to
// update their trust policies. The key is never logged; errors name the Secret, never its data.
type Key struct {
	// Reader reads the Secret uncached; Writer creates it.
	Reader client.Reader
	Writer client.Client
	// Name is the Secret (DefaultNamespace/DefaultName when empty).
	Name client.ObjectKey

	mu  sync.Mutex
	key []byte
}

// Get returns the installation key, creating it the first time.
func (k *Key) Get(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	name := k.Name
	if name.Name == "" {
		name = client.ObjectKey{Namespace: DefaultNamespace, Name: DefaultName}
	}
	key, err := k.read(ctx, name)
	if apierrors.IsNotFound(err) {
		key, err = k.create(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	k.key = key
	return key, nil
}

// ExternalID returns the external ID of workspace logicalCluster.
func (k *Key) ExternalID(ctx context.Context, logicalCluster string) (string, error) {
	key, err := k.Get(ctx)
	if err != nil {
		return "", err
	}
	return For(key, logicalCluster), nil
}

func (k *Key) read(ctx context.Context, name client.ObjectKey) ([]byte, error) {
	sec := &corev1.Secret{}
	if err := k.Reader.Get(ctx, name, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("failed to read the external ID key %s: %w", name, err)
	}
	key := sec.Data[KeyField]
	if len(key) < KeyBytes {
		return nil, fmt.Errorf("the external ID key %s has no key %q of at least %d bytes: an admin restores it (or deletes it, which changes every workspace's external ID)", name, KeyField, KeyBytes)
	}
	return key, nil
}

func (k *Key) create(ctx context.Context, name client.ObjectKey) ([]byte, error) {
	key := make([]byte, KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("failed to generate the external ID key: %w", err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name, Labels: map[string]string{ManagedByLabel: "kubeopera-manager"}},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{KeyField: key},
	}
	err := k.Writer.Create(ctx, sec)
	switch {
	case err == nil:
		return key, nil
	case apierrors.IsAlreadyExists(err):
		// Another replica created it meanwhile: its key is the key.
		key, err := k.read(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil, errors.New("the external ID key " + name.String() + " was created and deleted meanwhile; trying again")
		}
		return key, err
	default:
		return nil, fmt.Errorf("failed to create the external ID key %s: %w", name, err)
	}
}
