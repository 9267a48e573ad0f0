package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// What FluxPods writes for a Pod that is reached through a Service (podNetwork) or whose token is
// bound to it (inCluster): the Pod object, its status as the kubelet reports it, and the
// Endpoints of the Services selecting it as kube-controller-manager's endpoints controller
// writes them. Sources are k8s.io/kubernetes v1.36.3.

// createPodObject creates the Pod of d's ReplicaSet p.rs as the ReplicaSet controller would: a
// generated name <replicaset>-<suffix> (pkg/controller/controller_utils.go
// getPodsPrefix/GetPodFromTemplate), the template's labels plus pod-template-hash (here
// FluxPods's own hash of the template, not the ReplicaSet controller's), annotations and spec.
// No owner reference: the ReplicaSet object (writeReplicaSet) is written for the readers of
// Deployments' rollouts, not as the Pod's controller.
func createPodObject(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, p *fluxPod) (*corev1.Pod, error) {
	t := d.Spec.Template
	lbls := maps.Clone(t.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[appsv1.DefaultDeploymentUniqueLabelKey] = p.template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.rs + "-", Namespace: d.Namespace, Labels: lbls, Annotations: maps.Clone(t.Annotations)},
		Spec:       *t.Spec.DeepCopy(),
	}
	pod, err := cs.CoreV1().Pods(d.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to create the Pod of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return pod, nil
}

// writeKubeAPIAccess writes into dir the files of the kube-api-access volume that the
// ServiceAccount admission plugin adds to a Pod (plugin/pkg/admission/serviceaccount/
// admission.go TokenVolumeSource: token, ca.crt, namespace): a token of ServiceAccount sa
// bound to pod, requested as the kubelet requests it (writePodKubeconfig), the cluster's CA and
// the namespace.
func writeKubeAPIAccess(ctx context.Context, admin *rest.Config, namespace, sa string, pod *corev1.Pod, dir string) error {
	if pod == nil {
		return errors.New("no Pod to bind the token to")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kc := filepath.Join(filepath.Dir(dir), "kube-api-access.kubeconfig")
	if err := writePodKubeconfig(ctx, admin, namespace, sa, pod, 0, kc); err != nil {
		return err
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		return err
	}
	auth, cluster := cfg.AuthInfos["pod"], cfg.Clusters["cluster"]
	if auth == nil || cluster == nil {
		return errors.New("the token kubeconfig has no user pod or cluster cluster")
	}
	return writeKeys(dir, map[string][]byte{"token": []byte(auth.Token), "ca.crt": cluster.CertificateAuthorityData, "namespace": []byte(namespace)})
}

// podStatus is the status the kubelet reports for p's Pod (pkg/kubelet/kubelet_pods.go
// generateAPIPodStatus; conditions from pkg/kubelet/status/generate.go): phase Running once its
// container was started (restartPolicy Always keeps a crashed container's Pod Running),
// podIP(s) the Pod's address, PodReadyToStartContainers, Initialized and PodScheduled True,
// ContainersReady and Ready True once the readiness probe passed, else False with reason
// ContainersNotReady and "containers with unready status: [<name>]"; the container's status
// with restartCount, running or waiting in CrashLoopBackOff.
func podStatus(pod *corev1.Pod, p *fluxPod) corev1.PodStatus {
	c := manager(&pod.Spec)
	name, image := "", ""
	if c != nil {
		name, image = c.Name, c.Image
	}
	now := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &p.startedAt, QOSClass: pod.Status.QOSClass}
	if p.net != nil {
		st.PodIP = p.net.ip
		st.PodIPs = []corev1.PodIP{{IP: p.net.ip}}
	}
	ready := corev1.ConditionFalse
	reason, message := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", name)
	if p.ready {
		ready, reason, message = corev1.ConditionTrue, "", ""
	}
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: ready, Reason: reason, Message: message},
		{Type: corev1.PodReady, Status: ready, Reason: reason, Message: message},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	// Keep a condition's transition time while its status stays.
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = now
		for _, old := range pod.Status.Conditions {
			if old.Type == st.Conditions[i].Type && old.Status == st.Conditions[i].Status {
				st.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	cst := corev1.ContainerStatus{Name: name, Image: image, Ready: p.ready, RestartCount: int32(p.restarts), Started: ptr.To(p.cmd != nil)}
	if p.cmd != nil {
		cst.State.Running = &corev1.ContainerStateRunning{StartedAt: p.startedAt}
	} else {
		cst.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off restarting failed container %s in pod %s_%s(%s)", name, pod.Name, pod.Namespace, pod.UID)}
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cst}
	return st
}

// syncPodObjects writes the status of the Pod objects FluxPods made, and the Endpoints of the
// Services that select them.
func (f *FluxPods) syncPodObjects(ctx context.Context, cs kubernetes.Interface) error {
	type snapshot struct {
		p   *fluxPod
		obj *corev1.Pod
		key string
	}
	f.mu.Lock()
	var pods []snapshot
	namespaces := map[string]bool{}
	for _, p := range f.pods {
		if p.object == nil {
			continue
		}
		ip := ""
		if p.net != nil {
			ip = p.net.ip
		}
		key := fmt.Sprintf("%v/%d/%v/%s", p.ready, p.restarts, p.cmd != nil, ip)
		pods = append(pods, snapshot{p: p, obj: p.object, key: key})
		namespaces[p.namespace] = true
	}
	for k := range f.endpoints {
		ns, _, _ := cutNamespace(k)
		namespaces[ns] = true
	}
	f.mu.Unlock()

	var errs []error
	ready := map[string][]*corev1.Pod{} // namespace -> Pod objects with their current status
	for _, s := range pods {
		f.mu.Lock()
		written := s.p.written == s.key
		st := podStatus(s.obj, s.p)
		f.mu.Unlock()
		obj := s.obj
		if !written {
			cur, err := cs.CoreV1().Pods(obj.Namespace).Get(ctx, obj.Name, metav1.GetOptions{})
			if err == nil {
				cur.Status = st
				cur, err = cs.CoreV1().Pods(obj.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			}
			if err != nil {
				if !apierrors.IsConflict(err) {
					errs = append(errs, fmt.Errorf("status of Pod %s/%s: %w", obj.Namespace, obj.Name, err))
				}
				continue
			}
			obj = cur
			f.mu.Lock()
			if s.p.object != nil && s.p.object.UID == cur.UID {
				s.p.object, s.p.written = cur, s.key
			}
			f.mu.Unlock()
		}
		ready[obj.Namespace] = append(ready[obj.Namespace], obj)
	}
	for ns := range namespaces {
		if err := f.syncEndpoints(ctx, cs, ns, ready[ns]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncEndpoints writes, as the endpoints controller's syncService does
// (pkg/controller/endpoint/endpoints_controller.go lines 348-530), the Endpoints of each Service
// of namespace ns with a selector that matches one of pods, or whose Endpoints FluxPods wrote
// before: one address per Pod with an IP (podToEndpointAddressForService: ip, nodeName (none:
// no Node runs the Pod), targetRef Kind Pod with namespace, name, uid), under addresses when the Pod is Ready and
// notReadyAddresses when not (addEndpointSubset; publishNotReadyAddresses puts every one under
// addresses), one port per Service port (named as the Service port, the number its targetPort
// resolves to on the Pod's container: endpointslice.FindPort), labels the Service's plus
// endpoints.kubernetes.io/managed-by=endpoint-controller (and service.kubernetes.io/headless
// for a Service without a cluster IP). The API server's service proxy reads these
// (pkg/registry/core/service/storage/storage.go ResourceLocation). EndpointSlices are not
// written: nothing here reads them (no kube-proxy runs).
func (f *FluxPods) syncEndpoints(ctx context.Context, cs kubernetes.Interface, ns string, pods []*corev1.Pod) error {
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var errs []error
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		key := ns + "/" + svc.Name
		if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var subsets []corev1.EndpointSubset
		for _, pod := range pods {
			if !sel.Matches(labels.Set(pod.Labels)) || len(pod.Status.PodIPs) == 0 {
				continue
			}
			addr := corev1.EndpointAddress{IP: pod.Status.PodIPs[0].IP,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
			if pod.Spec.NodeName != "" { // no Node runs the Pod here: an empty nodeName is invalid
				addr.NodeName = ptr.To(pod.Spec.NodeName)
			}
			podReady := false
			for _, c := range pod.Status.Conditions {
				podReady = podReady || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			var ports []corev1.EndpointPort
			for _, sp := range svc.Spec.Ports {
				n := targetPort(&sp, &pod.Spec)
				if n == 0 {
					continue // FindPort fails: this port gets no endpoint from this Pod
				}
				ports = append(ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
			}
			subset := corev1.EndpointSubset{Ports: ports}
			if podReady || svc.Spec.PublishNotReadyAddresses {
				subset.Addresses = []corev1.EndpointAddress{addr}
			} else {
				subset.NotReadyAddresses = []corev1.EndpointAddress{addr}
			}
			subsets = append(subsets, subset)
		}
		f.mu.Lock()
		wrote := f.endpoints[key]
		f.mu.Unlock()
		if len(subsets) == 0 && !wrote {
			continue // a Service of nothing FluxPods runs: not ours to write
		}
		lbls := maps.Clone(svc.Labels)
		if lbls == nil {
			lbls = map[string]string{}
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
			lbls[corev1.IsHeadlessService] = ""
		}
		lbls["endpoints.kubernetes.io/managed-by"] = "endpoint-controller"
		endpoints := cs.CoreV1().Endpoints(ns) //nolint:staticcheck // deprecated since v1.33, but the service proxy reads Endpoints, not EndpointSlices
		cur, err := endpoints.Get(ctx, svc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = endpoints.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns, Labels: lbls}, Subsets: subsets}, metav1.CreateOptions{}) //nolint:staticcheck // see above
		case err == nil:
			if equalSubsets(cur.Subsets, subsets) && maps.Equal(cur.Labels, lbls) {
				break
			}
			cur.Subsets, cur.Labels = subsets, lbls
			_, err = endpoints.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			if !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("Endpoints %s: %w", key, err))
			}
			continue
		}
		f.mu.Lock()
		f.endpoints[key] = true
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// equalSubsets compares the fields syncEndpoints writes.
func equalSubsets(a, b []corev1.EndpointSubset) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(s corev1.EndpointSubset) string {
		return fmt.Sprintf("%v|%v|%v", addrKeys(s.Addresses), addrKeys(s.NotReadyAddresses), s.Ports)
	}
	for i := range a {
		if key(a[i]) != key(b[i]) {
			return false
		}
	}
	return true
}

func addrKeys(as []corev1.EndpointAddress) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		ref := ""
		if a.TargetRef != nil {
			ref = a.TargetRef.Name + "/" + string(a.TargetRef.UID)
		}
		out = append(out, a.IP+"@"+ref)
	}
	return out
}

// cutNamespace splits namespace/name.
func cutNamespace(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// writeReplicaSet writes the ReplicaSet p.rs of d as the Deployment controller creates it and
// the ReplicaSet controller reports it (k8s.io/kubernetes v1.36.3
// pkg/controller/deployment/sync.go getNewReplicaSet, lines 195-219: name
// <deployment>-<pod-template-hash>, the template's labels plus pod-template-hash on the
// ReplicaSet and its template, the Deployment's selector plus that label, minReadySeconds, a
// controller reference to the Deployment; pkg/controller/replicaset/replica_set_utils.go
// calculateStatus: replicas, readyReplicas, availableReplicas, observedGeneration). Helm's
// install --wait reads it (helm.sh/helm/v3 v3.19.0 pkg/kube/ready.go: GetNewReplicaSet,
// replicaSetReady, deploymentReady), as helm-controller installs a chart. ReplicaSets of d's
// earlier templates are scaled to 0, as a Recreate rollout leaves them.
func writeReplicaSet(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, p podState) error {
	if p.rs == "" {
		return nil
	}
	hash := p.rs[len(d.Name)+1:]
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	want := replicas(d)
	var ready int32
	if p.ready && want > 0 {
		ready = 1
	}
	rsc := cs.AppsV1().ReplicaSets(d.Namespace)
	rs, err := rsc.Get(ctx, p.rs, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		rs, err = rsc.Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{
				Name: p.rs, Namespace: d.Namespace, Labels: tmpl.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(want), MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: tmpl},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("ReplicaSet %s/%s: %w", d.Namespace, p.rs, err)
	}
	if ptr.Deref(rs.Spec.Replicas, 0) != want {
		rs.Spec.Replicas = ptr.To(want)
		if rs, err = rsc.Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("ReplicaSet %s/%s: %w", d.Namespace, p.rs, err)
		}
	}
	st := appsv1.ReplicaSetStatus{Replicas: want, FullyLabeledReplicas: want, ReadyReplicas: ready, AvailableReplicas: ready, ObservedGeneration: rs.Generation}
	if !equality.Semantic.DeepEqual(rs.Status, st) {
		rs.Status = st
		if _, err := rsc.UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status of ReplicaSet %s/%s: %w", d.Namespace, p.rs, err)
		}
	}
	// Earlier templates' ReplicaSets: scaled to nothing.
	list, err := rsc.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.Name == p.rs || !metav1.IsControlledBy(old, d) || (ptr.Deref(old.Spec.Replicas, 0) == 0 && old.Status.Replicas == 0) {
			continue
		}
		old.Spec.Replicas = ptr.To[int32](0)
		if old, err = rsc.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return err
		}
		old.Status = appsv1.ReplicaSetStatus{ObservedGeneration: old.Generation}
		if _, err := rsc.UpdateStatus(ctx, old, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
