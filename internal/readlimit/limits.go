package readlimit

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Defaults of Limits. A real cluster fits comfortably: the Kubernetes scalability envelope is
// 5000 nodes and 150000 pods per cluster (kubernetes/community, sig-scalability/configs-and-limits/
// thresholds.md); a page of 200 nodes or pods is a few MiB of JSON and at most a few hundred
// array elements per object (a node lists at most 50 images: kubelet --node-status-max-images).
const (
	// DefaultMaxResponseBytes caps one response body, decompressed: 32 MiB.
	DefaultMaxResponseBytes int64 = 32 << 20
	// DefaultMaxResponseElements caps the JSON array elements in one response. Each may decode
	// into a whole Go struct (up to about 1.2 KiB for a Pod or a Deployment), so this, not the
	// byte cap, bounds the memory a decoded response takes: 150000 elements, a few hundred MiB at
	// the very worst.
	DefaultMaxResponseElements int64 = 150000
	// DefaultMaxListPages caps the pages of one list: at 200 items a page, room for 400000 items.
	DefaultMaxListPages = 2000
	// DefaultMaxListItems caps the items of one list, over all its pages.
	DefaultMaxListItems = 200000
	// MaxDepth is the deepest nesting of JSON arrays and objects read (encoding/json refuses
	// deeper than 10000 as well; no Kubernetes object comes near).
	MaxDepth = 10000
)

// Limits bound what is read from one cluster. Zero fields take the defaults.
type Limits struct {
	// MaxResponseBytes caps one response body, as read after the transport's transparent gzip
	// decoding (DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// MaxResponseElements caps the JSON array elements of one response, at any depth
	// (DefaultMaxResponseElements).
	MaxResponseElements int64
	// MaxListPages caps the pages one list may take (DefaultMaxListPages).
	MaxListPages int
	// MaxListItems caps the items one list may hold, over all its pages (DefaultMaxListItems).
	MaxListItems int
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxResponseBytes <= 0 {
		l.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if l.MaxResponseElements <= 0 {
		l.MaxResponseElements = DefaultMaxResponseElements
	}
	if l.MaxListPages <= 0 {
		l.MaxListPages = DefaultMaxListPages
	}
	if l.MaxListItems <= 0 {
		l.MaxListItems = DefaultMaxListItems
	}
	return l
}

// Error says what a cluster answered beyond a limit, e.g. "the cluster's node list exceeded
// 2000 pages". It never quotes the answer.
type Error struct {
	// Subject is what was read: "node list", "response to GET /api/v1/nodes".
	Subject string
	// Limit is the limit passed, with its unit: "2000 pages", "32 MiB (decompressed)".
	Limit string
	// Detail, when set, replaces "exceeded <Limit>" (an encoding not asked for).
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return "the cluster's " + e.Subject + " " + e.Detail
	}
	return "the cluster's " + e.Subject + " exceeded " + e.Limit
}

// StalledReason makes the reconcile skeleton stop the object as Stalled with reason
// ReadLimitExceeded, not retry it: a cluster that answers more than any real cluster would (or in
// an encoding nobody asked for) answers the same on the next attempt, and every attempt costs
// the platform the capped read again. The tenant fixes the target, then asks for a retry.
func (e *Error) StalledReason() string { return commonv1alpha1.ReadLimitExceededReason }

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// bytesLimit formats a byte cap: "32 MiB (decompressed)", "1000 bytes (decompressed)".
func bytesLimit(n int64) string {
	return FormatBytes(n) + " (decompressed)"
}

// FormatQuantity formats n bytes as a Kubernetes quantity, e.g. "32Mi" (a flag's default).
func FormatQuantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// FormatBytes formats n bytes in the largest binary unit that divides it: "32 MiB", "1000 bytes".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func countLimit(n int64, unit string) string { return fmt.Sprintf("%d %s", n, unit) }
