package workspaces

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// exportEndpoints returns the virtual workspace URLs of the export behind endpoint slice slice in
// the platform workspace kcpCfg points at. kcp lists a shard's URL there only while that shard
// holds at least one APIBinding to the export (kcp v0.31
// pkg/reconciler/apis/apiexportendpointsliceurls: a shard without consumers removes its URL), so
// the list covers every bound workspace once the slice's conditions are all True; it is an error
// while they are not, because the list may then be stale.
func exportEndpoints(ctx context.Context, r *RESTClients, kcpCfg *rest.Config, slice string) ([]string, error) {
	es := &apisv1alpha1.APIExportEndpointSlice{}
	if err := r.Get(ctx, kcpCfg, kcpCfg.Host, "/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/"+slice, es); err != nil {
		return nil, fmt.Errorf("failed to get APIExportEndpointSlice %s: %w", slice, err)
	}
	for _, cond := range es.Status.Conditions {
		if cond.Status != "True" {
			return nil, fmt.Errorf("APIExportEndpointSlice %s is not ready (%s: %s); its URLs may be stale", slice, cond.Type, cond.Message)
		}
	}
	urls := make([]string, 0, len(es.Status.APIExportEndpoints))
	for _, ep := range es.Status.APIExportEndpoints {
		urls = append(urls, ep.URL)
	}
	return urls, nil
}

// virtualWorkspaceClient returns an uncached client for /clusters/<logicalCluster> below the
// virtual workspace URL vwURL, with cfg's identity.
func virtualWorkspaceClient(cfg *rest.Config, vwURL, logicalCluster string, scheme *runtime.Scheme) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.Host = strings.TrimRight(vwURL, "/") + "/clusters/" + logicalCluster
	return client.New(c, client.Options{Scheme: scheme})
}

// boundTo reports whether logicalCluster has an APIBinding to the export served at the virtual
// workspace URLs urls (from exportEndpoints). It lists the export's APIBindings of every workspace
// through each URL's wildcard view, which kcp serves read-only to the export's owner (kcp v0.31
// pkg/virtual/apiexport/authorizer/binding.go: "APIBindings are always available from an
// APIExport VW"). false is positive evidence: every shard with consumers of the export answered
// and none holds a binding of logicalCluster. Any failed list is an error, never "not bound".
func boundTo(ctx context.Context, r *RESTClients, kcpCfg *rest.Config, urls []string, logicalCluster string) (bool, error) {
	for _, u := range urls {
		next := ""
		for {
			list := &apisv1alpha1.APIBindingList{}
			path := "/clusters/*/apis/apis.kcp.io/v1alpha1/apibindings?limit=500"
			if next != "" {
				path += "&continue=" + url.QueryEscape(next)
			}
			if err := r.Get(ctx, kcpCfg, u, path, list); err != nil {
				return false, fmt.Errorf("failed to list APIBindings through %s: %w", u, err)
			}
			for _, b := range list.Items {
				if b.Annotations[logicalClusterAnnotationKCP] == logicalCluster {
					return true, nil
				}
			}
			if next = list.Continue; next == "" {
				break
			}
		}
	}
	return false, nil
}

// logicalClusterAnnotationKCP is where kcp puts an object's logical cluster name.
const logicalClusterAnnotationKCP = "kcp.io/cluster"

// ExportKinds are the kinds of one export that the terminator deletes in a terminating workspace.
type ExportKinds struct {
	// EndpointSlice names the export's APIExportEndpointSlice in the platform workspace.
	EndpointSlice string
	// Lists holds one empty list per kind, e.g. &TenantList{}.
	Lists []client.ObjectList
}

// WorkspaceCRs is the terminator's view of a terminating workspace's CRs, read through the exports'
// virtual workspaces with the manager's own (least-privilege) identity, uncached. Remaining deletes
// the CRs not yet being deleted (so each goes through its finalizer) and returns how many remain.
// "Cannot tell" is never "none left": a workspace whose CRs cannot be listed counts as empty only
// when the export's APIBindings, read through every shard's virtual workspace, show no binding of
// that workspace (kcp deletes an APIBinding only after every object of its bound resources is
// gone); every other failure is an error, so the terminator keeps its entry and retries.
type WorkspaceCRs struct {
	// KCPConfig points at the platform workspace, with the manager's identity.
	KCPConfig *rest.Config
	// Scheme knows the kinds in Exports.
	Scheme *runtime.Scheme
	// Exports are the platform's exports and their kinds.
	Exports []ExportKinds

	rest RESTClients
}

// Remaining implements WorkspaceObjectsFunc.
func (w *WorkspaceCRs) Remaining(ctx context.Context, logicalCluster string) (int, error) {
	remaining := 0
	for _, e := range w.Exports {
		n, err := w.exportRemaining(ctx, e, logicalCluster)
		if err != nil {
			return 0, err
		}
		remaining += n
	}
	return remaining, nil
}

func (w *WorkspaceCRs) exportRemaining(ctx context.Context, e ExportKinds, logicalCluster string) (int, error) {
	urls, err := exportEndpoints(ctx, &w.rest, w.KCPConfig, e.EndpointSlice)
	if err != nil {
		return 0, err
	}
	// The workspace lives on one shard; only that shard's virtual workspace serves it.
	var errs []error
	for _, u := range urls {
		c, err := virtualWorkspaceClient(w.KCPConfig, u, logicalCluster, w.Scheme)
		if err != nil {
			return 0, err
		}
		n, err := deleteAndCount(ctx, c, e.Lists)
		if err == nil {
			return n, nil
		}
		errs = append(errs, fmt.Errorf("through %s: %w", u, err))
	}
	bound, err := boundTo(ctx, &w.rest, w.KCPConfig, urls, logicalCluster)
	if err != nil {
		return 0, fmt.Errorf("cannot tell whether workspace %s still has objects of export %s: %w", logicalCluster, e.EndpointSlice, errors.Join(append(errs, err)...))
	}
	if !bound {
		return 0, nil
	}
	return 0, fmt.Errorf("workspace %s is bound to export %s but its objects cannot be listed: %w", logicalCluster, e.EndpointSlice, errors.Join(errs...))
}

// deleteAndCount deletes the objects of lists not yet being deleted and returns how many exist.
func deleteAndCount(ctx context.Context, c client.Client, lists []client.ObjectList) (int, error) {
	remaining := 0
	for _, list := range lists {
		list = list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, list); err != nil {
			return 0, fmt.Errorf("failed to list %T: %w", list, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return 0, err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				return 0, fmt.Errorf("unexpected list item %T", item)
			}
			remaining++
			if obj.GetDeletionTimestamp() == nil {
				if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					return 0, fmt.Errorf("failed to delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
				}
			}
		}
	}
	return remaining, nil
}

// OwnerKind says where the kind named in a backend namespace's owner annotation is served.
type OwnerKind struct {
	// EndpointSlice names the export's APIExportEndpointSlice in the platform workspace.
	EndpointSlice string
	// Resource is the owner kind's resource, e.g. kubeopera.io/v1alpha1 tenants.
	Resource schema.GroupVersionResource
	// Namespaced says whether the owner kind is namespaced.
	Namespaced bool
}

// OwnerExistsFunc reports whether the object named by a backend namespace's owner annotation
// ("Tenant default/alice") still exists in logicalCluster. An error means "cannot tell".
type OwnerExistsFunc func(ctx context.Context, logicalCluster, owner string) (bool, error)

// OwnerLookup looks owners up through the exports' virtual workspaces with the manager's identity.
type OwnerLookup struct {
	// KCPConfig points at the platform workspace, with the manager's identity.
	KCPConfig *rest.Config
	// Kinds maps the kind named in an owner annotation to where it is served.
	Kinds map[string]OwnerKind

	rest RESTClients
}

// Exists implements OwnerExistsFunc. false needs a NotFound naming the object itself from the
// virtual workspace that serves the workspace (it passed kcp's binding check there); a Forbidden
// (that shard does not serve the workspace, or no access) or any other error is "cannot tell".
func (l *OwnerLookup) Exists(ctx context.Context, logicalCluster, owner string) (bool, error) {
	kind, namespace, name, err := ParseOwner(owner)
	if err != nil {
		return false, err
	}
	k, ok := l.Kinds[kind]
	if !ok {
		return false, fmt.Errorf("owner %q: unknown kind %s", owner, kind)
	}
	if k.Namespaced != (namespace != "") {
		return false, fmt.Errorf("owner %q does not name a %s", owner, kind)
	}
	urls, err := exportEndpoints(ctx, &l.rest, l.KCPConfig, k.EndpointSlice)
	if err != nil {
		return false, err
	}
	path := "/clusters/" + logicalCluster + "/apis/" + k.Resource.Group + "/" + k.Resource.Version
	if namespace != "" {
		path += "/namespaces/" + namespace
	}
	path += "/" + k.Resource.Resource + "/" + name
	var errs []error
	for _, u := range urls {
		err := l.rest.Get(ctx, l.KCPConfig, u, path, nil)
		switch {
		case err == nil:
			return true, nil
		case IsNotFoundOf(err, k.Resource.Group, name):
			return false, nil
		}
		errs = append(errs, fmt.Errorf("through %s: %w", u, err))
	}
	return false, fmt.Errorf("cannot tell whether %s exists in %s: %w", owner, logicalCluster, errors.Join(errs...))
}

// RESTClients keeps one plain REST client per server; requests name their whole path, so no
// discovery is needed per workspace.
type RESTClients struct {
	mu      sync.Mutex
	clients map[string]rest.Interface
}

// get GETs absPath (which may carry a query) below server (a URL, possibly with a path such as a virtual workspace's) with
// cfg's credentials, decoding the answer into into unless it is nil; a failure is the server's
// answer as an API error, with its status details.
func (r *RESTClients) Get(ctx context.Context, cfg *rest.Config, server, absPath string, into runtime.Object) error {
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	c, err := r.client(cfg, u.Scheme+"://"+u.Host)
	if err != nil {
		return err
	}
	absPath, query, _ := strings.Cut(absPath, "?")
	req := c.Get().AbsPath(strings.TrimRight(u.Path, "/") + absPath)
	values, err := url.ParseQuery(query)
	if err != nil {
		return err
	}
	for k, vs := range values {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	if into == nil {
		return req.Do(ctx).Error()
	}
	return req.Do(ctx).Into(into)
}

func (r *RESTClients) client(cfg *rest.Config, host string) (rest.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[host]; ok {
		return c, nil
	}
	c := rest.CopyConfig(cfg)
	c.Host, c.APIPath = host, ""
	c.GroupVersion = &metav1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(KCPScheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	if r.clients == nil {
		r.clients = map[string]rest.Interface{}
	}
	r.clients[host] = rc
	return rc, nil
}

// ParseOwner splits an owner annotation "Kind namespace/name" (or "Kind name").
func ParseOwner(owner string) (kind, namespace, name string, err error) {
	kind, ref, ok := strings.Cut(owner, " ")
	if !ok || kind == "" || ref == "" {
		return "", "", "", fmt.Errorf("owner %q is not \"Kind namespace/name\"", owner)
	}
	if ns, n, ok := strings.Cut(ref, "/"); ok {
		return kind, ns, n, nil
	}
	return kind, "", ref, nil
}

// IsNotFoundOf reports whether err is a NotFound whose details name the object asked for, i.e. an
// answer of the storage that serves it, not of a proxy or an authorizer.
func IsNotFoundOf(err error, group, name string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == group && d.Name == name
}
