package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// StatusPatcher writes an object's status with one merge patch per pass, guarded by the
// resourceVersion the pass started from, so a pass that read a stale copy cannot overwrite a newer
// status (an admin's phase reset, another pass).
type StatusPatcher struct {
	client client.Client
	before client.Object
}

// NewStatusPatcher snapshots obj; Patch writes what changed since.
func NewStatusPatcher(c client.Client, obj Object) *StatusPatcher {
	return &StatusPatcher{client: c, before: obj.DeepCopyObject().(client.Object)}
}

// Rebase moves the snapshot's metadata to obj's (after a metadata patch such as adding the
// finalizer or an annotation), so the status patch is guarded by the current resourceVersion.
func (p *StatusPatcher) Rebase(obj Object) {
	p.before.SetResourceVersion(obj.GetResourceVersion())
	p.before.SetFinalizers(obj.GetFinalizers())
	p.before.SetAnnotations(obj.GetAnnotations())
}

type patcherKey struct{}

// withPatcher makes the pass' status patcher reachable from its steps (PatchAnnotations).
func withPatcher(ctx context.Context, p *StatusPatcher) context.Context {
	return context.WithValue(ctx, patcherKey{}, p)
}

// PatchAnnotations sets (non-nil value) or removes (nil) annotations of obj, guarded by its
// resourceVersion, and rebases the running pass' status patch on the result. Steps record
// in-flight work on the object itself this way (a job ID, when a wait began), so a restarted
// manager resumes it. Nothing is written when nothing changes.
func PatchAnnotations(ctx context.Context, c client.Client, obj Object, changes map[string]*string) error {
	return patchAnnotations(ctx, c, obj, changes, true)
}

// RecordAnnotations is PatchAnnotations without the resourceVersion guard, for recording the ID
// of an external job the step has just started (a provisioning run, a scaffold job): the job
// exists whatever else changed on the object meanwhile, and an ID lost to a conflict would make
// the next pass start a second one. The merge patch touches only these annotations.
func RecordAnnotations(ctx context.Context, c client.Client, obj Object, changes map[string]*string) error {
	return patchAnnotations(ctx, c, obj, changes, false)
}

func patchAnnotations(ctx context.Context, c client.Client, obj Object, changes map[string]*string, guarded bool) error {
	ann := maps.Clone(obj.GetAnnotations())
	changed := false
	for k, v := range changes {
		cur, ok := ann[k]
		switch {
		case v == nil && ok:
			delete(ann, k)
			changed = true
		case v != nil && (!ok || cur != *v):
			if ann == nil {
				ann = map[string]string{}
			}
			ann[k] = *v
			changed = true
		}
	}
	if !changed {
		return nil
	}
	// Patch a copy: the response carries the stored status, and obj's holds this pass' changes.
	before := obj.DeepCopyObject().(client.Object)
	patched := obj.DeepCopyObject().(client.Object)
	patched.SetAnnotations(ann)
	var opts []client.MergeFromOption
	if guarded {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	if err := c.Patch(ctx, patched, client.MergeFromWithOptions(before, opts...)); err != nil {
		return fmt.Errorf("failed to annotate %s: %w", obj.GetName(), err)
	}
	obj.SetAnnotations(patched.GetAnnotations())
	obj.SetResourceVersion(patched.GetResourceVersion())
	if p, ok := ctx.Value(patcherKey{}).(*StatusPatcher); ok {
		p.Rebase(obj)
	}
	return nil
}

// Publish writes the status as it stands in the middle of a pass (a phase entered, see
// Pass.PublishPhases), without bumping observedGeneration, and moves the snapshot to it, so the
// pass' final Patch writes only what changed after.
func (p *StatusPatcher) Publish(ctx context.Context, obj Object) error {
	if err := p.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to patch status: %w", err)
	}
	p.before = obj.DeepCopyObject().(client.Object)
	return nil
}

// Patch bumps observedGeneration when the pass succeeded (passErr nil: every step done, or a step
// waiting on an external actor with the status saying so) or ended in a terminal failure (a
// reconcile.TerminalError), never after a transient error, then writes the status if it changed.
func (p *StatusPatcher) Patch(ctx context.Context, obj Object, passErr error) error {
	if passErr == nil || errors.Is(passErr, reconcile.TerminalError(nil)) {
		obj.SetObservedGeneration(obj.GetGeneration())
	}
	diff, err := client.MergeFrom(p.before).Data(obj)
	if err != nil {
		return fmt.Errorf("failed to compute status patch: %w", err)
	}
	if string(diff) == "{}" {
		return nil
	}
	if err := p.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to patch status: %w", err)
	}
	return nil
}
