package kubernetescluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeopera/kubeopera/syncer"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/internal/flavors"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
)

// admit counts the KubernetesCluster against the workspace's cap (MaxPerWorkspace) before
// anything is created for it: first come, first served, and an admitted one stays admitted.
func (r *Reconciler) admit(ctx context.Context, s *scope) error {
	if reconcile.IsTrue(s.kc, platformv1alpha1.AdmittedCondition) {
		return nil
	}
	if limit := (reconcile.CountLimit{Max: r.MaxPerWorkspace, Kind: "KubernetesClusters"}); limit.Max > 0 {
		list := &platformv1alpha1.KubernetesClusterList{}
		if err := s.Workspace.List(ctx, list); err != nil {
			return fmt.Errorf("failed to list the workspace's KubernetesClusters: %w", err)
		}
		if err := limit.Check(len(reconcile.Ahead(s.kc, reconcile.Pointers(list.Items), platformv1alpha1.AdmittedCondition))); err != nil {
			return err
		}
	}
	reconcile.MarkTrue(s.kc, platformv1alpha1.AdmittedCondition, commonv1alpha1.SucceededReason, "Within the workspace's limits")
	return nil
}

func isOTC(kc *platformv1alpha1.KubernetesCluster) bool {
	return strings.EqualFold(kc.Spec.ProviderRef.Type, ProviderOTC)
}

// provider checks that the platform builds clusters of the provider type (OTC, or a type with a
// Crossplane Composition for ManagedCluster on the backend) and waits for the ProviderConfig to be
// Ready and of that type.
func (r *Reconciler) provider(ctx context.Context, s *scope) error {
	kc := s.kc
	if !isOTC(kc) {
		if err := composition(ctx, s, kc.Spec.ProviderRef.Type); err != nil {
			return err
		}
	}
	if kc.Spec.ProviderRef.ConfigRef == nil || kc.Spec.ProviderRef.ConfigRef.Name == "" {
		return reconcile.Stalled(commonv1alpha1.InvalidSpecReason, "spec.providerRef.configRef.name must name a ProviderConfig in this namespace")
	}
	name := kc.Spec.ProviderRef.ConfigRef.Name
	pc := &platformv1alpha1.ProviderConfig{}
	if err := s.Workspace.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, fmt.Sprintf("ProviderConfig %s/%s does not exist", kc.Namespace, name), referenceRecheck)
		}
		return err
	}
	if !reconcile.IsTrue(pc, commonv1alpha1.ReadyCondition) {
		msg := fmt.Sprintf("ProviderConfig %s/%s is not Ready", kc.Namespace, name)
		if c := reconcile.GetCondition(pc, platformv1alpha1.CredentialsValidCondition); c != nil && c.Message != "" {
			msg += ": " + c.Reason + ": " + c.Message
		}
		return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, reconcile.Truncate(msg), referenceRecheck)
	}
	if !strings.EqualFold(orDefault(pc.Spec.Type, ProviderOTC), kc.Spec.ProviderRef.Type) {
		return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, fmt.Sprintf(
			"ProviderConfig %s/%s holds %s credentials, not %s (spec.providerRef.type)", kc.Namespace, name, orDefault(pc.Spec.Type, ProviderOTC), kc.Spec.ProviderRef.Type), referenceRecheck)
	}
	s.providerConfig = crossplane.ProviderConfigName(kc.Namespace, name)
	s.credentialsSecret = crossplane.CredentialsSecretName(kc.Namespace, name)
	reconcile.MarkTrue(kc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason, fmt.Sprintf("ProviderConfig %s is Ready", name))
	return nil
}

// composition finds the Crossplane Composition of ManagedCluster labelled for the provider type on
// the backend; without one, the type is not supported (Stalled: an admin installs one, then the
// tenant retries).
func composition(ctx context.Context, s *scope, providerType string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(xr.CompositionGVK.GroupVersion().WithKind(xr.CompositionGVK.Kind + "List"))
	err := s.Backend.Reader.List(ctx, list)
	if crossplane.NotServed(err) {
		return reconcile.Stalledf(platformv1alpha1.UnsupportedProviderReason,
			"spec.providerRef.type %q is not a provider this platform implements: no Crossplane Compositions are installed on the platform's backend; supported: %s", providerType, ProviderOTC)
	}
	if err != nil {
		return fmt.Errorf("failed to list Crossplane Compositions: %w", err)
	}
	supported := []string{ProviderOTC}
	for _, c := range list.Items {
		apiVersion, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "apiVersion")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "kind")
		provider := c.GetLabels()[xr.ProviderLabel]
		if apiVersion != xr.GVK.GroupVersion().String() || kind != xr.Kind || provider == "" {
			continue
		}
		if provider == xr.ProviderValue(providerType) {
			return nil
		}
		if !slices.Contains(supported, provider) {
			supported = append(supported, provider)
		}
	}
	return reconcile.Stalledf(platformv1alpha1.UnsupportedProviderReason,
		"spec.providerRef.type %q is not a provider this platform implements (no Crossplane Composition of %s labelled %s=%s on the platform's backend); supported: %s",
		providerType, xr.Kind, xr.ProviderLabel, xr.ProviderValue(providerType), strings.Join(supported, ", "))
}

// matchFlavor picks the node flavor: spec.nodeFlavor, checked against the catalog, or the
// catalog's best match of the MachineCapabilities.
func matchFlavor(ctx context.Context, s *scope) error {
	kc := s.kc
	catalog := &platformv1alpha1.ProviderMachineFlavorList{}
	if err := s.Workspace.List(ctx, catalog); err != nil {
		return fmt.Errorf("failed to read the flavor catalog: %w", err)
	}
	if kc.Spec.NodeFlavor != "" {
		f, err := flavors.Override(catalog.Items, kc.Spec.ProviderRef.Type, kc.Spec.NodeFlavor, kc.Spec.NodeAvailableZone)
		if err != nil {
			return reconcile.Waiting(platformv1alpha1.NoMatchingFlavorReason, "spec.nodeFlavor: "+err.Error(), referenceRecheck)
		}
		s.flavor = f.Spec.Flavor
		kc.Status.Flavor = s.flavor
		reconcile.MarkTrue(kc, platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason, "spec.nodeFlavor "+s.flavor+" is in the catalog")
		return nil
	}
	mc := &platformv1alpha1.MachineCapabilities{}
	name := kc.Spec.MachineCapabilitiesRef.Name
	if err := s.Workspace.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Waiting(platformv1alpha1.MachineCapabilitiesMissingReason, fmt.Sprintf("MachineCapabilities %s/%s does not exist", kc.Namespace, name), referenceRecheck)
		}
		return err
	}
	res := flavors.Match(catalog.Items, flavors.Request{Provider: kc.Spec.ProviderRef.Type, Zone: kc.Spec.NodeAvailableZone, Capabilities: mc.Spec})
	if res.Best == nil {
		return reconcile.Waiting(platformv1alpha1.NoMatchingFlavorReason, res.Missing, referenceRecheck)
	}
	s.flavor = res.Best.Spec.Flavor
	kc.Status.Flavor = s.flavor
	reconcile.MarkTrue(kc, platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s (%s) is the smallest catalog flavor with what MachineCapabilities %s asks", s.flavor, res.Best.Name, name))
	return nil
}

func (s *scope) object(suffix string) otc.Object {
	return otc.Object{Name: s.name(suffix), Namespace: s.Namespace, Labels: map[string]string{
		workspaces.FingerprintLabel:               workspaces.Fingerprint(s.LogicalCluster),
		"platform.edgeconnect.eu/owner-kind":      "KubernetesCluster",
		"platform.edgeconnect.eu/owner-namespace": s.kc.Namespace,
		"platform.edgeconnect.eu/owner-name":      workspaces.ShortName(s.kc.Name, 63),
	}}
}

// network makes the VPC and subnet the tenant did not give and, for a public endpoint, the
// elastic IP the cluster binds, and waits until they are Ready.
func (r *Reconciler) network(ctx context.Context, s *scope) error {
	kc := s.kc
	var built []*unstructured.Unstructured
	if kc.Spec.VpcID == "" {
		vpc, err := s.objects.Apply(ctx, otc.VPC(otc.VPCParams{Object: s.object("vpc"), ProviderConfigName: s.providerConfig, CIDR: defaultVPCCIDR, Region: kc.Spec.Region}))
		if err != nil {
			return err
		}
		built = append(built, vpc)
	}
	if kc.Spec.SubnetID == "" {
		gw, err := otc.GatewayIP(defaultSubnetCIDR)
		if err != nil {
			return err
		}
		subnet, err := s.objects.Apply(ctx, otc.Subnet(otc.SubnetParams{Object: s.object("subnet"), ProviderConfigName: s.providerConfig,
			CIDR: defaultSubnetCIDR, GatewayIP: gw, VPCID: kc.Spec.VpcID, VPCName: s.name("vpc"), Region: kc.Spec.Region}))
		if err != nil {
			return err
		}
		built = append(built, subnet)
	}
	if pe := kc.Spec.PublicEndpoint; pe != nil {
		eip, err := s.objects.Apply(ctx, otc.EIP(otc.EIPParams{Object: s.object("eip"), ProviderConfigName: s.providerConfig,
			BandwidthMbit: int64(pe.BandwidthMbit), Region: kc.Spec.Region}))
		if err != nil {
			return err
		}
		built = append(built, eip)
	}
	for _, u := range built {
		if ready, reason, msg := crossplane.Observe(u, platformv1alpha1.CreatingReason); !ready {
			return r.waitOn(s, u, reason, msg)
		}
	}
	var parts []string
	if kc.Spec.VpcID != "" && kc.Spec.SubnetID != "" {
		parts = append(parts, "Using the tenant's VPC "+kc.Spec.VpcID+" and subnet "+kc.Spec.SubnetID)
	} else {
		parts = append(parts, "VPC and subnet are Ready")
	}
	if kc.Spec.PublicEndpoint != nil {
		parts = append(parts, fmt.Sprintf("elastic IP %s (%d Mbit/s) is Ready", s.name("eip"), kc.Spec.PublicEndpoint.BandwidthMbit))
	}
	reconcile.MarkTrue(kc, platformv1alpha1.NetworkReadyCondition, commonv1alpha1.SucceededReason, strings.Join(parts, "; "))
	return nil
}

// cluster makes the ClusterV3 and waits until it is Synced and Ready.
func (r *Reconciler) cluster(ctx context.Context, s *scope) error {
	kc := s.kc
	p := otc.ClusterParams{Object: s.object("cluster"), ProviderConfigName: s.providerConfig, Region: kc.Spec.Region,
		KubernetesVersion: kc.Spec.Kubernetes.Version, AvailabilityZone: kc.Spec.AvailableZone, ConnectionSecretName: s.name("conn")}
	if kc.Spec.VpcID != "" {
		p.VPCID = kc.Spec.VpcID
	} else {
		p.VPCName = s.name("vpc")
	}
	if kc.Spec.SubnetID != "" {
		p.SubnetID = kc.Spec.SubnetID
	} else {
		p.SubnetName = s.name("subnet")
	}
	if kc.Spec.PublicEndpoint != nil {
		p.EIPName = s.name("eip")
	}
	u, err := s.objects.Apply(ctx, otc.Cluster(p))
	if err != nil {
		return err
	}
	if ready, reason, msg := crossplane.Observe(u, platformv1alpha1.CreatingReason); !ready {
		return r.waitOn(s, u, reason, msg)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.ClusterReadyCondition, commonv1alpha1.SucceededReason, "ClusterV3 "+u.GetName()+" is Synced and Ready")
	return nil
}

// nodePool makes the NodePoolV3 with the cluster's id and the key pair written literally, and
// waits until it is Synced and Ready. A pool whose create failed is never Ready, whatever its
// Ready condition says (otc.ObserveNodePool): a sold-out one says so, with what to change, and
// once the tenant changed it the failed pool is deleted and created anew (the provider never
// retries a failed create).
func (r *Reconciler) nodePool(ctx context.Context, s *scope) error {
	kc := s.kc
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(otc.ClusterGVK)
	if err := s.Backend.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.name("cluster")}, cl); err != nil {
		return err
	}
	id, ok := otc.AtProviderID(cl)
	if !ok {
		return r.waitOn(s, cl, platformv1alpha1.CreatingReason, "Waiting for the cluster's id")
	}
	zone := orDefault(kc.Spec.NodeAvailableZone, otc.DefaultNodeAvailabilityZone)
	want := otc.NodePool(otc.NodePoolParams{Object: s.object("pool"), ProviderConfigName: s.providerConfig,
		ClusterID: id, Flavor: s.flavor, NodeCount: kc.Spec.NodeCount, AvailabilityZone: zone,
		KeyPair: kc.Spec.KeyPair, DiskSize: kc.Spec.NodeDiskSize})
	key := client.ObjectKeyFromObject(want)
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(otc.NodePoolGVK)
	if err := s.Backend.Client.Get(ctx, key, cur); client.IgnoreNotFound(err) != nil {
		return err
	} else if err == nil && otc.ObserveNodePool(cur).CreateFailed && !crossplane.Contains(cur.Object["spec"], want.Object["spec"]) {
		gone, deleting, err := s.objects.Delete(ctx, otc.NodePoolGVK, key)
		if err != nil {
			return err
		}
		if !gone {
			return r.waitOn(s, deleting, platformv1alpha1.ReplacingReason, fmt.Sprintf(
				"Replacing NodePoolV3 %s, whose create failed, with one of %d × %s in zone %s: waiting for it to be deleted", key.Name, kc.Spec.NodeCount, s.flavor, zone))
		}
	}
	u, err := s.objects.Apply(ctx, want)
	if err != nil {
		return err
	}
	switch st := otc.ObserveNodePool(u); {
	case st.SoldOut && zone == otc.DefaultNodeAvailabilityZone:
		return r.waitOn(s, u, platformv1alpha1.SoldOutReason, fmt.Sprintf(
			"OTC has no capacity for flavor %s in any zone of the region (spec.nodeAvailableZone: random; the node pool is SoldOut and its create failed): pick another spec.nodeFlavor and/or a lower spec.nodeCount, and the node pool is replaced",
			s.flavor))
	case st.SoldOut:
		return r.waitOn(s, u, platformv1alpha1.SoldOutReason, fmt.Sprintf(
			"OTC has no capacity for flavor %s in zone %s (the node pool is SoldOut and its create failed): set spec.nodeAvailableZone: random to let OTC pick a zone with capacity, or pick another spec.nodeFlavor and/or a lower spec.nodeCount, and the node pool is replaced",
			s.flavor, zone))
	case st.CreateFailed:
		return r.waitOn(s, u, orDefault(st.Reason, commonv1alpha1.FailedReason), fmt.Sprintf(
			"NodePoolV3 %s could not be created and the provider does not retry: %s. Change the node pool's settings (spec.nodeFlavor, spec.nodeAvailableZone, spec.nodeCount, spec.nodeDiskSize, spec.keyPair) and it is replaced",
			u.GetName(), st.Message))
	}
	if ready, reason, msg := crossplane.Observe(u, platformv1alpha1.CreatingReason); !ready {
		return r.waitOn(s, u, reason, msg)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.NodePoolReadyCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("NodePoolV3 %s (%d × %s) is Synced and Ready", u.GetName(), kc.Spec.NodeCount, s.flavor))
	return nil
}

// composite makes the ManagedCluster XR for a provider other than OTC and waits until Crossplane
// says it is Synced and Ready: its Composition builds network, cluster and workers, and writes
// the kubeconfig into Secret <base>-conn.
func (r *Reconciler) composite(ctx context.Context, s *scope) error {
	kc := s.kc
	o := s.object("cluster")
	p := xr.Params{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels,
		Provider: kc.Spec.ProviderRef.Type, Region: kc.Spec.Region, KubernetesVersion: kc.Spec.Kubernetes.Version,
		AvailableZone: kc.Spec.AvailableZone, NodeAvailableZone: kc.Spec.NodeAvailableZone,
		NodeFlavor: s.flavor, NodeCount: kc.Spec.NodeCount, VPCID: kc.Spec.VpcID, SubnetIDs: xr.SubnetIDs(kc.Spec.SubnetID), KeyPair: kc.Spec.KeyPair,
		CredentialsSecretName: s.credentialsSecret, CredentialsKey: crossplane.CredentialsKey,
		KubeconfigSecretName: s.name("conn")}
	if kc.Spec.NodeDiskSize != nil {
		p.NodeDiskSizeGiB = otc.DiskSizeGiB(*kc.Spec.NodeDiskSize)
	}
	u, err := s.objects.Apply(ctx, xr.New(p).GetUnstructured())
	if err != nil {
		return err
	}
	if ready, reason, msg := xr.Status(xr.From(u)); !ready {
		return r.waitOn(s, u, reason, msg)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.ClusterReadyCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s %s is Synced and Ready: network, cluster and %d × %s workers built by the %s composition", xr.Kind, u.GetName(), kc.Spec.NodeCount, s.flavor, kc.Spec.ProviderRef.Type))
	return nil
}

// kubeconfig delivers the cluster's kubeconfig. A composite cluster's is the one its
// Composition writes into the connection Secret (key ConnectionSecretKey). An OTC cluster's is
// built from the certificates the ClusterV3 observes (the OTC provider publishes no connection
// details for CCE clusters: see otc.Kubeconfig), naming the public endpoint when the tenant asked
// for one (and waiting until CCE reports it) and the private one otherwise; status.endpoint and
// endpointAccess say which.
func (r *Reconciler) kubeconfig(ctx context.Context, s *scope) error {
	kc := s.kc
	var raw []byte
	var endpoint string
	if isOTC(kc) {
		cl := &unstructured.Unstructured{}
		cl.SetGroupVersionKind(otc.ClusterGVK)
		if err := s.Backend.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.name("cluster")}, cl); err != nil {
			return err
		}
		built, ep, waiting, err := otc.Kubeconfig(cl, kc.Spec.PublicEndpoint != nil)
		if err != nil {
			return reconcile.Waiting(commonv1alpha1.WaitingReason, "The cluster's observed certificates cannot make a kubeconfig: "+err.Error(), r.PollInterval)
		}
		if waiting != "" {
			return r.waitOn(s, cl, commonv1alpha1.WaitingReason, "Waiting: "+waiting)
		}
		raw = built
		kc.Status.Endpoint, kc.Status.EndpointAccess = ep.Server, platformv1alpha1.EndpointPrivate
		endpoint = fmt.Sprintf(", naming the cluster's private endpoint %s (reachable only from inside its VPC)", ep.Server)
		if ep.Public {
			kc.Status.EndpointAccess = platformv1alpha1.EndpointPublic
			endpoint = fmt.Sprintf(", naming the cluster's public endpoint %s (its elastic IP)", ep.Server)
		}
	} else {
		conn := &corev1.Secret{}
		err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.name("conn")}, conn)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if raw = conn.Data[r.ConnectionSecretKey]; len(raw) == 0 {
			r.arrivals.Await(s.Request, &corev1.SecretList{}, s.Namespace, s.name("conn"), conn.ResourceVersion)
			return reconcile.Waiting(commonv1alpha1.WaitingReason, fmt.Sprintf("Waiting for the %s composition to write the kubeconfig into Secret %s (key %q)", kc.Spec.ProviderRef.Type, s.name("conn"), r.ConnectionSecretKey), r.PollInterval)
		}
	}
	name := s.kubeconfigSecret()
	if err := s.Deliver(ctx, name, map[string][]byte{DeliveredKubeconfigKey: raw}); err != nil {
		return err
	}
	kc.Status.KubeconfigSecret = name
	reconcile.MarkTrue(kc, platformv1alpha1.KubeconfigDeliveredCondition, commonv1alpha1.SucceededReason, fmt.Sprintf("Kubeconfig delivered in Secret %s (key %q)%s", name, DeliveredKubeconfigKey, endpoint))
	return nil
}

// waitOn says the cluster waits on backend object u (reason, msg) and watches u for its next
// change after the version read, which requeues the cluster; PollInterval is the fallback.
func (r *Reconciler) waitOn(s *scope, u *unstructured.Unstructured, reason, msg string) error {
	if rv := u.GetResourceVersion(); rv != "" {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(u.GroupVersionKind().GroupVersion().WithKind(u.GetKind() + "List"))
		r.arrivals.Await(s.Request, list, u.GetNamespace(), u.GetName(), rv)
	}
	return reconcile.Waiting(reason, msg, r.PollInterval)
}

// backendNamespace makes kcp-<fp> exist and belong to this workspace.
func backendNamespace(ctx context.Context, s *scope) error {
	return s.EnsureNamespaces(ctx, syncer.NamespaceClaim{Name: s.Namespace})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// deleteOf deletes this KubernetesCluster's managed resource of kind gvk and waits until it is
// gone, so the next one is deleted only then.
func (r *Reconciler) deleteOf(gvk schema.GroupVersionKind, suffix string, opts ...client.DeleteOption) func(context.Context, *scope) error {
	return func(ctx context.Context, s *scope) error {
		gone, cur, err := s.objects.Delete(ctx, gvk, client.ObjectKey{Namespace: s.Namespace, Name: s.name(suffix)}, opts...)
		if err != nil || gone {
			return err
		}
		return r.waitOn(s, cur, commonv1alpha1.DeletingReason, fmt.Sprintf("Waiting for %s %s to be deleted", gvk.Kind, cur.GetName()))
	}
}

// removeKubeconfig removes the delivered kubeconfig.
func removeKubeconfig(ctx context.Context, s *scope) error {
	return s.Undeliver(ctx, s.kubeconfigSecret())
}
