package reconcile

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// RequestLogger returns ctx carrying the request's logger and the logger itself: every line
// carries `cluster` (the logical cluster, without the provider prefix) and the object under the
// kind's lowerCamel name (e.g. "tenant"). multicluster-runtime does not add them; every reconciler
// starts with this.
func RequestLogger(ctx context.Context, req mcreconcile.Request, kind string) (context.Context, logr.Logger) {
	log := ctrl.LoggerFrom(ctx).WithValues(
		"cluster", workspaces.LogicalCluster(req.ClusterName),
		lowerFirst(kind), klog.KRef(req.Namespace, req.Name),
	)
	return ctrl.LoggerInto(ctx, log), log
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
