package apiexport

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

func at(uid, rv string) *kov1alpha1.Tenant {
	return &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID("u-" + uid), ResourceVersion: rv}}
}

// Two writes in one pass (say, the finalizer, then the status): a cached copy either replaced is
// stale, the copy they made is not, and nothing of another object is.
func TestOwnWrites(t *testing.T) {
	var w ownWrites
	obj := at("a", "2")
	w.record(obj, "1")
	obj.ResourceVersion = "3"
	w.record(obj, "2")
	for _, c := range []struct {
		what      string
		got, want bool
	}{
		{"the copy before both writes is stale", w.replaced(at("a", "1")), true},
		{"the copy before the second write is stale", w.replaced(at("a", "2")), true},
		{"the copy the last write made is not", w.replaced(at("a", "3")), false},
		{"a tenant's later version is not", w.replaced(at("a", "4")), false},
		{"another object's copy is not", w.replaced(at("b", "1")), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v", c.what, c.got)
		}
	}
	// A write that made no new version replaced nothing.
	w.record(at("c", "5"), "5")
	if w.replaced(at("c", "5")) {
		t.Error("a write that made no new version is remembered")
	}
	// Old writes are forgotten at the next write.
	w.m[k8stypes.UID("u-a")].last = time.Now().Add(-2 * ownWriteTTL)
	w.swept = time.Now().Add(-2 * ownWriteTTL)
	w.record(at("d", "2"), "1")
	if w.replaced(at("a", "1")) || len(w.m) != 1 {
		t.Errorf("writes older than %s still remembered: %d objects", ownWriteTTL, len(w.m))
	}
}
