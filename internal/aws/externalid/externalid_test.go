package externalid_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/aws/externalid"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/test/framework"
)

func TestFor(t *testing.T) {
	key := bytes.Repeat([]byte{7}, externalid.KeyBytes)
	other := bytes.Repeat([]byte{8}, externalid.KeyBytes)
	// The reference value: HMAC-SHA256 as RFC 2104 defines it, hex, after the prefix.
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("1bg4baqdjkcw9lz4"))
	want := "kubeopera-" + hex.EncodeToString(mac.Sum(nil))

	got := externalid.For(key, "1bg4baqdjkcw9lz4")
	if got != want {
		t.Errorf("For = %q, want %q", got, want)
	}
	// Within sts:AssumeRole's ExternalId rules (API_AssumeRole.html), recognisable by its prefix.
	if !regexp.MustCompile(`^[\w+=,.@:/-]{2,1000}$`).MatchString(got) || len(got) > 1224 || !kubeconfig.ValidExternalID(got) || !strings.HasPrefix(got, externalid.Prefix) {
		t.Errorf("For = %q is not a valid ExternalId with the prefix", got)
	}
	for name, tc := range map[string]struct{ a, b string }{
		"another workspace":         {externalid.For(key, "1bg4baqdjkcw9lz4"), externalid.For(key, "2xyz")},
		"another installation":      {externalid.For(key, "1bg4baqdjkcw9lz4"), externalid.For(other, "1bg4baqdjkcw9lz4")},
		"a prefix of the workspace": {externalid.For(key, "1bg4"), externalid.For(key, "1bg4baqdjkcw9lz4")},
	} {
		if tc.a == tc.b {
			t.Errorf("%s: the same external ID %q", name, tc.a)
		}
	}
}

// TestKeyOnTheBackend: the installation key as the manager keeps it, with its shipped backend
// identity (config/rbac): created once by whichever of several replicas comes first, the same key
// for all of them and after a restart, immutable; and that identity can create no other Secret in
// kubeopera-system, nor read another.
func TestKeyOnTheBackend(t *testing.T) {
	m := framework.StartBackendAsManager(t)
	manager, admin := m.Manager, m.Admin
	ctx := t.Context()

	// Five replicas start at once.
	replicas := make([]*externalid.Key, 5)
	keys := make([][]byte, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i := range replicas {
		replicas[i] = &externalid.Key{Reader: manager, Writer: manager}
		wg.Go(func() { keys[i], errs[i] = replicas[i].Get(ctx) })
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Errorf("replica %d has another key than replica 0", i)
		}
	}
	if len(keys[0]) != externalid.KeyBytes {
		t.Errorf("key of %d bytes, want %d", len(keys[0]), externalid.KeyBytes)
	}
	sec := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: externalid.DefaultNamespace, Name: externalid.DefaultName}, sec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sec.Data[externalid.KeyField], keys[0]) || sec.Immutable == nil || !*sec.Immutable || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s/%s: type %s immutable %v, or not the replicas' key", sec.Namespace, sec.Name, sec.Type, sec.Immutable)
	}
	// A restarted manager derives the same external IDs.
	restarted := &externalid.Key{Reader: manager, Writer: manager}
	got, err := restarted.ExternalID(ctx, "1bg4baqdjkcw9lz4")
	if err != nil || got != externalid.For(keys[0], "1bg4baqdjkcw9lz4") {
		t.Errorf("after a restart: %q %v, want the same external ID", got, err)
	}

	// The manager's identity can create no other Secret in kubeopera-system (the admission policy
	// may take a moment to be in effect), and read none but the key.
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: externalid.DefaultNamespace, Name: "admin-only"}, StringData: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if err := manager.Get(ctx, client.ObjectKey{Namespace: externalid.DefaultNamespace, Name: "admin-only"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager read another Secret in kubeopera-system: %v", err)
	}
	for name, s := range map[string]*corev1.Secret{
		"another name": {ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-external-id-key2"}, Immutable: ptr.To(true)},
		"a service account token": {ObjectMeta: metav1.ObjectMeta{Name: externalid.DefaultName, Annotations: map[string]string{corev1.ServiceAccountNameKey: "kubeopera-manager"}},
			Type: corev1.SecretTypeServiceAccountToken, Immutable: ptr.To(true)},
		"a mutable key": {ObjectMeta: metav1.ObjectMeta{Name: externalid.DefaultName}},
	} {
		s.Namespace = externalid.DefaultNamespace
		framework.Eventually(t, 30*time.Second, name+" refused by the admission policy", func() (bool, string) {
			err := manager.Create(ctx, s.DeepCopy(), client.DryRunAll)
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may only create the immutable Opaque Secret kubeopera-external-id-key"), "err " + errString(err)
		})
	}
	if err := manager.Delete(ctx, sec); !apierrors.IsForbidden(err) {
		t.Errorf("the manager could delete the key: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
