package hostcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
)

// maxRuns is how many provisioner runs a HostCluster's status keeps.
const maxRuns = 10

// cloudCredentialSecretName is the backend copy of the tenant's cloud credential (kcp-<fp>), the
// one the provisioner reads (credentialSecretRef).
func cloudCredentialSecretName(clusterID string) string {
	return "hostcluster-" + clusterID + "-cloud-credential"
}

// provisioned reports whether the cluster was built and its kubeconfig stored.
func provisioned(hc *kov1alpha1.HostCluster) bool {
	return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition)
}

// provision builds a provision_vanilla or provision_eks cluster through the provisioner (seed
// 000, "Provisioning"): the first pass copies the tenant's credential to the backend and POSTs
// the run, keeping its ID in an annotation so a restart polls the same run instead of starting
// another; every pass then polls it and shows its progress; a failed run fails the HostCluster
// with Terraform's error text; a succeeded one's kubeconfig is fetched once and stored and
// delivered like a connected cluster's, after which the cluster goes on like a connected one.
func (r *Reconciler) provision(ctx context.Context, s *scope) error {
	hc := s.hc
	if hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting {
		return nil
	}
	// The external ID is shown from the first pass, before the credential is even looked at, so
	// the tenant can put it into their role's trust policy first.
	if _, err := r.workspaceExternalID(ctx, s); err != nil {
		return err
	}
	if provisioned(hc) {
		return nil
	}
	if r.Provisioner == nil {
		return reconcile.Stalledf(kov1alpha1.ProvisioningUnavailableReason,
			"mode %s needs the cluster provisioner, and the manager has no CLUSTER_PROVISIONER_BASE_URL (--cluster-provisioner-base-url): an admin sets it, or use mode connect_existing", hc.Spec.Mode)
	}
	id, err := runID(ctx, s, kov1alpha1.ProvisionJobIDAnnotation)
	if err != nil {
		return err
	}
	if id == "" {
		p, err := r.startRun(ctx, s, api.OperationApply)
		if err != nil {
			return err
		}
		if err := s.RecordJob(ctx, kov1alpha1.ProvisionJobIDAnnotation, p.ID); err != nil {
			return err
		}
		return r.showRun(s, kov1alpha1.ProvisionedCondition, p)
	}
	p, err := r.Provisioner.Get(ctx, id)
	if err != nil {
		return r.runError(s, id, err)
	}
	if err := s.ownRun(p, kov1alpha1.ProvisionJobIDAnnotation); err != nil {
		return err
	}
	s.record(p)
	switch p.Status {
	case api.StatusFailed:
		return reconcile.Stalledf(kov1alpha1.ProvisioningFailedReason, "provisioning run %s failed: %s", id, orDefault(p.Message, "no message"))
	case api.StatusSucceeded:
	default:
		return r.showRun(s, kov1alpha1.ProvisionedCondition, p)
	}
	raw, err := r.Provisioner.Kubeconfig(ctx, id)
	if err != nil {
		return r.runError(s, id, err)
	}
	if err := checkProvisionedKubeconfig(hc, raw); err != nil {
		return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "provisioning run %s succeeded but its kubeconfig is refused: %v", id, err)
	}
	if err := storeAndDeliver(ctx, s, kubeconfigSecretName(hc.Spec.ClusterID), map[string][]byte{KubeconfigKey: raw}); err != nil {
		return err
	}
	hc.Status.KubeconfigSecret = kubeconfigSecretName(hc.Spec.ClusterID)
	reconcile.MarkTrue(hc, kov1alpha1.ProvisionedCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("Provisioning run %s built the cluster (%s in %s); its kubeconfig is stored", id, hc.Spec.Provisioning.Topology, hc.Spec.Region))
	return nil
}

// checkProvisionedKubeconfig checks a run's kubeconfig as hostile input (it comes back from the
// tenant's cloud account): an EKS one must be exactly what the runner builds (kubeconfig.ParseEKS:
// the helper with pinned flags, which the manager never runs); any other is a tenant's
// kubeconfig (kubeconfig.ParseUntrusted: no exec at all).
func checkProvisionedKubeconfig(hc *kov1alpha1.HostCluster, raw []byte) error {
	if isEKS(hc) {
		_, err := kubeconfig.ParseEKS(raw)
		return err
	}
	_, err := kubeconfig.ParseUntrusted(raw)
	return err
}

// isEKS reports whether hc's cluster is (to be) built with the eks topology.
func isEKS(hc *kov1alpha1.HostCluster) bool {
	return hc.Spec.Provisioning != nil && hc.Spec.Provisioning.Topology == kov1alpha1.TopologyEKS
}

// workspaceExternalID is the AWS external ID of the HostCluster's workspace (externalid.For under
// the installation key), which every sts:AssumeRole for it carries; it is shown in
// status.awsExternalID for the tenant's trust policy.
func (r *Reconciler) workspaceExternalID(ctx context.Context, s *scope) (string, error) {
	if s.externalID == "" {
		id, err := r.ExternalIDKey.ExternalID(ctx, s.LogicalCluster)
		if err != nil {
			return "", fmt.Errorf("failed to derive the workspace's AWS external ID: %w", err)
		}
		s.externalID = id
	}
	s.hc.Status.AWSExternalID = s.externalID
	return s.externalID, nil
}

// runID is the run a HostCluster tracks in annotation key ("" when a new one is due; read fresh
// before one is started, see reconcile.Scope.TrackedJob).
func runID(ctx context.Context, s *scope, key string) (string, error) {
	return s.TrackedJob(ctx, func(o reconcile.Object) string { return o.GetAnnotations()[key] })
}

// ownRun refuses a run the HostCluster's annotation key names that was not started for this
// object of this workspace (api.Provision.BelongsTo): the annotations are the tenant's to write,
// so an ID there proves nothing. Such a run is never followed, recorded or asked for its
// kubeconfig, and the message says nothing about whose it is.
func (s *scope) ownRun(p api.Provision, key string) error {
	if p.BelongsTo(s.LogicalCluster, string(s.hc.UID)) {
		return nil
	}
	return reconcile.Stalledf(kov1alpha1.RunNotOwnedReason,
		"annotation %s names provisioning run %s, which was not started for this HostCluster: the platform does not follow it; set annotation %s to a new value to drop it and start a run of its own",
		key, p.ID, kov1alpha1.RetryAnnotation)
}

// startRun copies the credential and asks the provisioner for a run of op, within the
// workspace's runs per hour (reserveRun).
func (r *Reconciler) startRun(ctx context.Context, s *scope, op api.Operation) (api.Provision, error) {
	hc := s.hc
	// Over the cap nothing is made, not even the credential copy.
	if err := r.checkRunQuota(ctx, s, op); err != nil {
		return api.Provision{}, err
	}
	granted, err := r.copyCredential(ctx, s)
	if err != nil {
		return api.Provision{}, err
	}
	if granted {
		// Kubernetes' RBAC authorizer sees a new RoleBinding a moment later: ask next pass.
		return api.Provision{}, reconcile.Waiting(kov1alpha1.WaitingReason, "Letting the provisioner read the credential copy", r.PollInterval)
	}
	pr := hc.Spec.Provisioning
	req := api.CreateRequest{
		ClusterID:            hc.Spec.ClusterID,
		Region:               hc.Spec.Region,
		Topology:             string(pr.Topology),
		ControlPlaneCount:    pr.ControlPlaneCount,
		NodeCount:            pr.NodeCount,
		InstanceType:         pr.InstanceType,
		KubernetesVersion:    pr.KubernetesVersion,
		TerraformEnvironment: terraformEnvironment(hc),
		CredentialSecretRef:  api.SecretRef{Namespace: s.Namespace, Name: cloudCredentialSecretName(hc.Spec.ClusterID)},
		Operation:            op,
		Workspace:            s.LogicalCluster,
		WorkspaceFingerprint: workspaces.Fingerprint(s.LogicalCluster),
		OwnerUID:             string(hc.UID),
	}
	if err := req.Validate(); err != nil {
		// The schema admits only what the provisioner accepts; region is the one field it does
		// not constrain for connected clusters.
		return api.Provision{}, reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "spec: %v", err)
	}
	if err := r.reserveRun(ctx, s, op); err != nil {
		return api.Provision{}, err
	}
	p, err := r.Provisioner.Create(ctx, req)
	if err != nil {
		var pe *pclient.Error
		if errors.As(err, &pe) && pe.Field == "credentialSecretRef" {
			// The copy is the platform's own: a provisioner that cannot read it is the platform's
			// problem (its RBAC still settling, or --provisioner-identity naming another account),
			// not the tenant's; say so and try again.
			return api.Provision{}, reconcile.Waiting(kov1alpha1.WaitingReason,
				fmt.Sprintf("The provisioner cannot read the credential copy yet (%s as %s): %v", name(req.CredentialSecretRef), r.ProvisionerIdentity, pe.Message), r.PollInterval)
		}
		// Refused for good (pclient.Error.Terminal): the skeleton stalls the HostCluster with the
		// step's reason.
		return api.Provision{}, fmt.Errorf("the provisioner refused the %s run: %w", op, err)
	}
	s.record(p)
	s.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, fmt.Sprintf("Provisioning run %s (%s) started", p.ID, op))
	return p, nil
}

// terraformEnvironment is spec.provisioning.terraformEnvironment, or the clusterID made a valid
// bucket suffix.
func terraformEnvironment(hc *kov1alpha1.HostCluster) string {
	if env := hc.Spec.Provisioning.TerraformEnvironment; env != "" {
		return env
	}
	env := strings.Trim(strings.ToLower(hc.Spec.ClusterID), "-")
	if len(env) > 37 {
		env = workspaces.ShortName(env, 37)
	}
	return env
}

// showRun shows a run in progress on cond and polls it again.
func (r *Reconciler) showRun(s *scope, cond string, p api.Provision) error {
	reason := "Unknown"
	if p.Status != "" {
		reason = strings.ToUpper(string(p.Status[:1])) + string(p.Status[1:])
	}
	msg := fmt.Sprintf("Run %s %s", p.ID, p.Status)
	if p.Message != "" {
		msg += ": " + p.Message
	}
	reconcile.MarkFalse(s.hc, cond, reason, reconcile.Truncate(msg))
	return reconcile.Waiting(reason, reconcile.Truncate(msg), r.PollInterval)
}

// runError turns a failed call about run id into the step's outcome.
func (r *Reconciler) runError(s *scope, id string, err error) error {
	if pclient.IsNotFound(err) {
		return reconcile.Stalledf(kov1alpha1.ProvisionRunLostReason,
			"the provisioner does not know run %s (runs are kept for a retention period); set annotation %s to a new value to start a new run", id, "kubeopera.io/retry")
	}
	// Refused for good (pclient.Error.Terminal): the skeleton stalls the HostCluster.
	return fmt.Errorf("run %s: %w", id, err)
}

// record puts a run into the bounded history, updating it when known.
func (s *scope) record(p api.Provision) {
	runs := s.hc.Status.ProvisionRuns
	i := 0
	for ; i < len(runs) && runs[i].ID != p.ID; i++ {
	}
	if i == len(runs) {
		runs = append(runs, kov1alpha1.ProvisionRun{ID: p.ID})
	}
	run := &runs[i]
	run.Operation = string(p.Operation)
	run.Outcome = string(p.Status)
	if p.StartedAt != nil {
		run.StartedAt = &metav1.Time{Time: *p.StartedAt}
	} else if run.StartedAt == nil {
		now := metav1.Now()
		run.StartedAt = &now
	}
	if p.FinishedAt != nil {
		run.FinishedAt = &metav1.Time{Time: *p.FinishedAt}
	}
	if len(runs) > maxRuns {
		runs = runs[len(runs)-maxRuns:]
	}
	s.hc.Status.ProvisionRuns = runs
}

// copyCredential checks the tenant's cloud credential and copies it to the backend for the
// provisioner, which may read that one Secret only: a Role naming it and a RoleBinding to the
// provisioner's identity, both owned by the copy so they go with it. With a role_arn the copy's
// external_id is the workspace's external ID, whatever the tenant's Secret says: every
// sts:AssumeRole the run makes carries it, so a role ARN of another tenant's account gets
// AccessDenied unless that account trusts this workspace's ID.
func (r *Reconciler) copyCredential(ctx context.Context, s *scope) (granted bool, err error) {
	hc := s.hc
	src, err := s.ReferencedSecret(ctx, hc.Spec.Provisioning.CredentialRef)
	if err != nil {
		return false, err
	}
	if err := checkCredential(src.Data, isEKS(hc) && r.PlatformAWS == nil); err != nil {
		return false, reconcile.Stalledf(kov1alpha1.InvalidCredentialReason, "Secret %s/%s: %v", hc.Namespace, src.Name, err)
	}
	externalID, err := r.workspaceExternalID(ctx, s)
	if err != nil {
		return false, err
	}
	data := map[string][]byte{}
	for _, k := range []string{api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialSessionToken, api.CredentialRoleARN} {
		if v := src.Data[k]; len(v) > 0 {
			data[k] = v
		}
	}
	if len(data[api.CredentialRoleARN]) > 0 {
		data[api.CredentialExternalID] = []byte(externalID)
	}
	if len(strings.TrimSpace(string(src.Data[api.CredentialExternalID]))) > 0 {
		s.Event(corev1.EventTypeNormal, kov1alpha1.ExternalIDIgnoredReason, fmt.Sprintf(
			"Secret %s/%s: key %s is ignored; every sts:AssumeRole for this workspace carries the platform's external ID %s (status.awsExternalID): put that into your role's trust policy",
			hc.Namespace, src.Name, api.CredentialExternalID, externalID))
	}
	name := cloudCredentialSecretName(hc.Spec.ClusterID)
	if err := s.Store(ctx, name, corev1.SecretTypeOpaque, data); err != nil {
		return false, err
	}
	return r.grantCredential(ctx, s, name)
}

// checkCredential says what is wrong with a credential's keys, never their values. Key
// external_id is not looked at: the platform sends its own (copyCredential). needAccessKey is
// set for an EKS cluster when the manager has no platform identity to assume a role with
// (Reconciler.PlatformAWS): it mints the cluster's tokens with the access key then (assuming
// role_arn with it when set).
func checkCredential(d map[string][]byte, needAccessKey bool) error {
	has := func(k string) bool { return len(strings.TrimSpace(string(d[k]))) > 0 }
	switch {
	case has(api.CredentialAccessKey) != has(api.CredentialSecretKey):
		return fmt.Errorf("keys %s and %s go together", api.CredentialAccessKey, api.CredentialSecretKey)
	case !has(api.CredentialAccessKey) && !has(api.CredentialRoleARN):
		return fmt.Errorf("needs keys %s and %s (an access key), or %s (a role to assume)",
			api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	case has(api.CredentialRoleARN) && !strings.HasPrefix(strings.TrimSpace(string(d[api.CredentialRoleARN])), "arn:aws"):
		return fmt.Errorf("key %s is not an IAM role ARN (arn:aws...:iam::<account>:role/<name>)", api.CredentialRoleARN)
	case needAccessKey && !has(api.CredentialAccessKey):
		return fmt.Errorf("topology eks needs keys %s and %s here: the platform signs the cluster's tokens with that access key (and assumes %s with it when set); it has no identity of its own to assume a role with",
			api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	}
	return nil
}

// grantCredential lets the provisioner's identity get the credential copy, and nothing else; it
// reports whether it created the grant now.
func (r *Reconciler) grantCredential(ctx context.Context, s *scope, secretName string) (bool, error) {
	sec := &corev1.Secret{}
	if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: secretName}, sec); err != nil {
		return false, err
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: sec.Name, UID: sec.UID}
	meta := metav1.ObjectMeta{Namespace: s.Namespace, Name: secretName + "-reader", Labels: s.Labels, OwnerReferences: []metav1.OwnerReference{owner}}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secretName}, Verbs: []string{"get"}}}}
	created := false
	switch err := s.Backend.Client.Create(ctx, role); {
	case err == nil:
		created = true
	case !apierrors.IsAlreadyExists(err):
		return false, fmt.Errorf("failed to let the provisioner read the credential: %w", err)
	}
	ns, name, ok := strings.Cut(r.ProvisionerIdentity, "/")
	if !ok {
		return false, errors.New("the provisioner's identity must be <namespace>/<serviceaccount>")
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: *meta.DeepCopy(),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	switch err := s.Backend.Client.Create(ctx, binding); {
	case err == nil:
		created = true
	case !apierrors.IsAlreadyExists(err):
		return false, fmt.Errorf("failed to let the provisioner read the credential: %w", err)
	}
	return created, nil
}

func name(ref api.SecretRef) string { return ref.Namespace + "/" + ref.Name }

// destroy runs terraform destroy for a provisioned HostCluster deleted with deletionPolicy
// Destroy, through the same Job path, before the finalizer goes; a failed destroy keeps the
// finalizer and says why (the tenant retries with kubeopera.io/retry). With Retain (the default)
// it says the infrastructure stays.
func (r *Reconciler) destroy(ctx context.Context, s *scope) error {
	hc := s.hc
	pr := hc.Spec.Provisioning
	if hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting || pr == nil || len(hc.Status.ProvisionRuns) == 0 {
		return nil
	}
	if pr.DeletionPolicy != kov1alpha1.DeletionPolicyDestroy {
		msg := fmt.Sprintf("Disconnected; the provisioned infrastructure (Terraform state in bucket %s) is left running: spec.provisioning.deletionPolicy is Retain",
			api.StateBucketName(workspaces.Fingerprint(s.LogicalCluster), terraformEnvironment(hc)))
		s.Event(corev1.EventTypeNormal, kov1alpha1.DeletingReason, msg)
		return nil
	}
	if reconcile.IsTrue(hc, kov1alpha1.InfrastructureDestroyedCondition) {
		return nil
	}
	if r.Provisioner == nil {
		return reconcile.Waiting(kov1alpha1.ProvisioningUnavailableReason, "deletionPolicy Destroy needs the cluster provisioner, and the manager has no CLUSTER_PROVISIONER_BASE_URL", r.PollInterval)
	}
	id, err := runID(ctx, s, kov1alpha1.DestroyJobIDAnnotation)
	if err != nil {
		return err
	}
	if id != "" && reconcile.RetryRequested(hc) {
		// The tenant asks again after a failed destroy: a new run.
		reconcile.MarkRetryHandled(hc)
		id = ""
	}
	if id == "" {
		p, err := r.startRun(ctx, s, api.OperationDestroy)
		if err != nil {
			return err
		}
		if err := s.RecordJob(ctx, kov1alpha1.DestroyJobIDAnnotation, p.ID); err != nil {
			return err
		}
		return r.showRun(s, kov1alpha1.InfrastructureDestroyedCondition, p)
	}
	p, err := r.Provisioner.Get(ctx, id)
	if err != nil {
		return r.runError(s, id, err)
	}
	if err := s.ownRun(p, kov1alpha1.DestroyJobIDAnnotation); err != nil {
		return err
	}
	s.record(p)
	switch p.Status {
	case api.StatusSucceeded:
		reconcile.MarkTrue(hc, kov1alpha1.InfrastructureDestroyedCondition, kov1alpha1.SucceededReason, fmt.Sprintf("Destroy run %s tore the infrastructure down", id))
		return nil
	case api.StatusFailed:
		return reconcile.Stalledf(kov1alpha1.DestroyFailedReason, "destroy run %s failed, the HostCluster stays until a destroy succeeds (set kubeopera.io/retry to try again): %s", id, orDefault(p.Message, "no message"))
	}
	return r.showRun(s, kov1alpha1.InfrastructureDestroyedCondition, p)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
