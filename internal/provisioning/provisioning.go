// Package provisioning is what a HostCluster does with the cluster provisioner
// (docs/provisioner.md): it copies the tenant's cloud credential to the backend and lets the
// provisioner read that one copy, counts the workspace's runs against its hourly cap, starts a
// run (apply or destroy) and follows it by the ID kept in an annotation, and keeps the run history
// in status. Every answer is mapped to the HostCluster's outcome (reconcile.Waiting while a run
// is in progress, reconcile.Stalled when it cannot succeed by retrying), so the controller's
// steps only say what a finished run means.
package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
)

// MaxRuns is how many provisioner runs a HostCluster's status keeps.
const MaxRuns = 10

// Runs starts and follows HostClusters' runs of the cluster provisioner.
type Runs struct {
	// Client is the provisioner's client.
	Client *pclient.Client
	// Identity is the provisioner's ServiceAccount on the backend, <namespace>/<name>: it is let
	// read the credential copies, and nothing else.
	Identity string
	// MaxPerHour caps the runs one workspace starts in any hour (ledger.go); 0: no limit.
	MaxPerHour int
	// PlatformIdentity says the manager has an AWS identity of its own to assume a tenant's role
	// with (for an EKS cluster's tokens): without it an EKS cluster's credential needs an access
	// key.
	PlatformIdentity bool
	// ManagedBy is the managed-by label of what Runs writes on the backend.
	ManagedBy string
	// PollInterval is how soon a run in progress is asked about again.
	PollInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Cluster is the HostCluster a run is for, in its reconcile pass.
type Cluster struct {
	*reconcile.Scope
	// HostCluster is the object reconciled; its status gets the run history.
	HostCluster *kov1alpha1.HostCluster
	// ExternalID is the workspace's AWS external ID, which every sts:AssumeRole of its runs
	// carries.
	ExternalID string
}

// Run says which run a step follows.
type Run struct {
	// Operation is what a new run does.
	Operation api.Operation
	// Annotation keeps the run's ID on the HostCluster (kov1alpha1.ProvisionJobIDAnnotation,
	// PlanJobIDAnnotation or DestroyJobIDAnnotation).
	Annotation string
	// Condition shows the run while it is in progress.
	Condition string
	// Again drops the run the annotation names and starts a new one (a retry after a failed
	// run).
	Again bool
	// Want is the InputsHash of the current spec (apply and plan runs): a tracked run made for
	// other inputs (an earlier spec) is waited for while it runs and then replaced by a new run.
	// Empty: any tracked run is the one.
	Want string
	// PlanRun (apply runs) is the approved plan to apply: a tracked run that applies anything
	// else is not the one.
	PlanRun string
}

// stale reports whether p is not the run asked for: made for other module inputs than run.Want
// (a run that does not say, created before runs carried their inputs, is taken as the current
// one), or applying another plan than run.PlanRun.
func stale(p api.Provision, run Run) bool {
	return (run.Want != "" && p.InputsHash != "" && p.InputsHash != run.Want) || (run.PlanRun != "" && p.PlanRun != run.PlanRun)
}

// Follow starts the run when the HostCluster tracks none, or tracks one for an earlier spec or
// plan that has ended (stale), and follows the one it tracks: while the run is queued or running
// it shows it on run.Condition and returns reconcile.Waiting (a stale one still running is waited
// for: RunInProgress); once it ended it returns it (succeeded or failed: the step says what that
// means). A start the provisioner refuses because another run of the cluster is active (409)
// waits for that run, or follows it when it is this HostCluster's own run of the same kind and
// spec. A run the annotation names that was not started for this HostCluster stalls it
// (RunNotOwned), and one the provisioner no longer knows stalls it with ProvisionRunLost.
func (r *Runs) Follow(ctx context.Context, c Cluster, run Run) (api.Provision, error) {
	id, err := c.TrackedJob(ctx, func(o reconcile.Object) string { return o.GetAnnotations()[run.Annotation] })
	if err != nil {
		return api.Provision{}, err
	}
	if run.Again {
		id = ""
	}
	if id != "" {
		p, err := r.follow(ctx, c, run, id)
		if err != nil || !stale(p, run) {
			return p, err
		}
		// A run for an earlier spec, ended: the current spec gets a run of its own, on the same
		// state.
	}
	p, err := r.start(ctx, c, run)
	if active, ok := pclient.ActiveRun(err); ok {
		return api.Provision{}, r.activeRun(ctx, c, run, active)
	}
	if err != nil {
		return api.Provision{}, err
	}
	if err := c.RecordJob(ctx, run.Annotation, p.ID); err != nil {
		return api.Provision{}, err
	}
	return api.Provision{}, r.show(c, run.Condition, p)
}

// follow polls the tracked run id: Waiting while it runs, the run once it ended (succeeded or
// failed) or when it was made for other inputs than run.Want (stale; while such a run runs, the
// step waits for it: one run at a time per cluster).
func (r *Runs) follow(ctx context.Context, c Cluster, run Run, id string) (api.Provision, error) {
	p, err := r.Client.Get(ctx, id)
	if err != nil {
		return api.Provision{}, runError(id, err)
	}
	// The annotations are the tenant's to write, so an ID there proves nothing: a run not
	// started for this object of this workspace is never followed, recorded or asked for its
	// kubeconfig, and the message says nothing about whose it is.
	if !p.BelongsTo(c.LogicalCluster, string(c.HostCluster.UID)) {
		return api.Provision{}, reconcile.Stalledf(kov1alpha1.RunNotOwnedReason,
			"annotation %s names provisioning run %s, which was not started for this HostCluster: the platform does not follow it; set annotation %s to a new value to drop it and start a run of its own",
			run.Annotation, p.ID, kov1alpha1.RetryAnnotation)
	}
	record(c.HostCluster, p)
	if stale(p, run) && !p.Status.Done() {
		return api.Provision{}, r.wait(c, run.Condition, fmt.Sprintf(
			"Run %s, for an earlier spec or plan, is still %s; the run for the current one starts when it has ended (one run at a time per cluster)", p.ID, p.Status))
	}
	if !p.Status.Done() {
		return api.Provision{}, r.show(c, run.Condition, p)
	}
	return p, nil
}

// activeRun is a start refused because run active of the cluster has not ended (the
// provisioner's 409): a run of this HostCluster doing what run asks for, for the current spec
// (the object lost track of it: a retry dropped the annotation), is followed from now on; any
// other is waited for, never overlapped.
func (r *Runs) activeRun(ctx context.Context, c Cluster, run Run, active string) error {
	p, err := r.Client.Get(ctx, active)
	switch {
	case pclient.IsNotFound(err):
		// Ended and swept meanwhile: start next pass.
		return r.wait(c, run.Condition, "Another run of this cluster has just ended; starting the next one")
	case err != nil:
		return runError(active, err)
	case !p.BelongsTo(c.LogicalCluster, string(c.HostCluster.UID)):
		// Whose it is is not said.
		return r.wait(c, run.Condition, "Another provisioning run of this cluster's Terraform state is still active; this run starts when it has ended (one run at a time per cluster)")
	}
	record(c.HostCluster, p)
	if p.Operation == run.Operation && !stale(p, run) && !p.Status.Done() {
		if err := c.RecordJob(ctx, run.Annotation, p.ID); err != nil {
			return err
		}
		return r.show(c, run.Condition, p)
	}
	return r.wait(c, run.Condition, fmt.Sprintf("Run %s (%s) of this cluster is still %s; the %s run starts when it has ended (one run at a time per cluster)", p.ID, p.Operation, p.Status, run.Operation))
}

// Active returns the run annotation names when it belongs to this HostCluster and has not ended:
// what a destroy must wait for.
func (r *Runs) Active(ctx context.Context, c Cluster, annotation string) (api.Provision, bool, error) {
	id := c.HostCluster.GetAnnotations()[annotation]
	if id == "" {
		return api.Provision{}, false, nil
	}
	p, err := r.Client.Get(ctx, id)
	switch {
	case pclient.IsNotFound(err):
		return api.Provision{}, false, nil
	case err != nil:
		return api.Provision{}, false, runError(id, err)
	case !p.BelongsTo(c.LogicalCluster, string(c.HostCluster.UID)):
		// Not this HostCluster's: nothing to wait for here (the provisioner still refuses a
		// second run of the same state).
		return api.Provision{}, false, nil
	}
	record(c.HostCluster, p)
	return p, !p.Status.Done(), nil
}

// wait shows on cond that the step waits for another run, and polls again.
func (r *Runs) wait(c Cluster, cond, msg string) error {
	reconcile.MarkFalse(c.HostCluster, cond, kov1alpha1.RunInProgressReason, msg)
	return reconcile.Waiting(kov1alpha1.RunInProgressReason, msg, r.PollInterval)
}

// Kubeconfig is the kubeconfig a succeeded run id built, as the run read it back from the
// tenant's cloud account: hostile input, to be parsed as such.
func (r *Runs) Kubeconfig(ctx context.Context, id string) ([]byte, error) {
	raw, err := r.Client.Kubeconfig(ctx, id)
	if err != nil {
		return nil, runError(id, err)
	}
	return raw, nil
}

// start copies the credential and asks the provisioner for a run of op, within the workspace's
// runs per hour.
func (r *Runs) start(ctx context.Context, c Cluster, run Run) (api.Provision, error) {
	hc := c.HostCluster
	op := run.Operation
	// Over the cap nothing is made, not even the credential copy.
	if err := r.checkQuota(ctx, c, op); err != nil {
		return api.Provision{}, err
	}
	granted, err := r.copyCredential(ctx, c)
	if err != nil {
		return api.Provision{}, err
	}
	if granted {
		// Kubernetes' RBAC authorizer sees a new RoleBinding a moment later: ask next pass.
		return api.Provision{}, reconcile.Waiting(kov1alpha1.WaitingReason, "Letting the provisioner read the credential copy", r.PollInterval)
	}
	req := Request(c, op)
	req.PlanRun = run.PlanRun
	if err := req.Validate(); err != nil {
		// The schema admits only what the provisioner accepts; region is the one field it does
		// not constrain for connected clusters.
		return api.Provision{}, reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "spec: %v", err)
	}
	if err := r.reserve(ctx, c, op); err != nil {
		return api.Provision{}, err
	}
	p, err := r.Client.Create(ctx, req)
	if _, ok := pclient.ActiveRun(err); ok {
		return api.Provision{}, err
	}
	if err != nil {
		var pe *pclient.Error
		if errors.As(err, &pe) && pe.Field == "credentialSecretRef" {
			// The copy is the platform's own: a provisioner that cannot read it is the platform's
			// problem (its RBAC still settling, or --provisioner-identity naming another account),
			// not the tenant's; say so and try again.
			ref := req.CredentialSecretRef
			return api.Provision{}, reconcile.Waiting(kov1alpha1.WaitingReason,
				fmt.Sprintf("The provisioner cannot read the credential copy yet (%s/%s as %s): %v", ref.Namespace, ref.Name, r.Identity, pe.Message), r.PollInterval)
		}
		// Refused for good (pclient.Error.Terminal): the skeleton stalls the HostCluster with the
		// step's reason.
		return api.Provision{}, fmt.Errorf("the provisioner refused the %s run: %w", op, err)
	}
	record(hc, p)
	c.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, fmt.Sprintf("Provisioning run %s (%s) started", p.ID, op))
	return p, nil
}

// Request is the provisioner's request for a run of op for the HostCluster: its spec's
// provisioning fields, the platform's credential copy and whose run it is.
func Request(c Cluster, op api.Operation) api.CreateRequest {
	hc := c.HostCluster
	pr := hc.Spec.Provisioning
	return api.CreateRequest{
		ClusterID:            hc.Spec.ClusterID,
		Region:               hc.Spec.Region,
		Topology:             string(pr.Topology),
		ControlPlaneCount:    pr.ControlPlaneCount,
		NodeCount:            pr.NodeCount,
		InstanceType:         pr.InstanceType,
		KubernetesVersion:    pr.KubernetesVersion,
		TerraformEnvironment: TerraformEnvironment(hc),
		CredentialSecretRef:  api.SecretRef{Namespace: c.Namespace, Name: CredentialSecretName(hc.Spec.ClusterID)},
		Operation:            op,
		Workspace:            c.LogicalCluster,
		WorkspaceFingerprint: workspaces.Fingerprint(c.LogicalCluster),
		OwnerUID:             string(hc.UID),
	}
}

// InputsHash is the InputsHash of the runs the HostCluster's current spec asks for: the module
// they render (api.CreateRequest.InputsHash).
func InputsHash(c Cluster) string {
	req := Request(c, api.OperationApply)
	return req.InputsHash()
}

// show shows a run in progress on cond and polls it again.
func (r *Runs) show(c Cluster, cond string, p api.Provision) error {
	reason := "Unknown"
	if p.Status != "" {
		reason = strings.ToUpper(string(p.Status[:1])) + string(p.Status[1:])
	}
	msg := fmt.Sprintf("Run %s %s", p.ID, p.Status)
	if p.Message != "" {
		msg += ": " + p.Message
	}
	reconcile.MarkFalse(c.HostCluster, cond, reason, reconcile.Truncate(msg))
	return reconcile.Waiting(reason, reconcile.Truncate(msg), r.PollInterval)
}

// runError turns a failed call about run id into the step's outcome.
func runError(id string, err error) error {
	if pclient.IsNotFound(err) {
		return reconcile.Stalledf(kov1alpha1.ProvisionRunLostReason,
			"the provisioner does not know run %s (runs are kept for a retention period); set annotation %s to a new value to start a new run", id, kov1alpha1.RetryAnnotation)
	}
	// Refused for good (pclient.Error.Terminal): the skeleton stalls the HostCluster.
	return fmt.Errorf("run %s: %w", id, err)
}

// record puts a run into hc's bounded run history, updating it when known.
func record(hc *kov1alpha1.HostCluster, p api.Provision) {
	runs := hc.Status.ProvisionRuns
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
	if len(runs) > MaxRuns {
		runs = runs[len(runs)-MaxRuns:]
	}
	hc.Status.ProvisionRuns = runs
}

// TerraformEnvironment is spec.provisioning.terraformEnvironment, or the clusterID made a valid
// bucket suffix.
func TerraformEnvironment(hc *kov1alpha1.HostCluster) string {
	if env := hc.Spec.Provisioning.TerraformEnvironment; env != "" {
		return env
	}
	env := strings.Trim(strings.ToLower(hc.Spec.ClusterID), "-")
	if len(env) > 37 {
		env = workspaces.ShortName(env, 37)
	}
	return env
}

// StateBucket is the S3 bucket of hc's Terraform state in the tenant's account.
func StateBucket(logicalCluster string, hc *kov1alpha1.HostCluster) string {
	return api.StateBucketName(workspaces.Fingerprint(logicalCluster), TerraformEnvironment(hc))
}

func (r *Runs) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
