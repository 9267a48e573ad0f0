package reconcile

import (
	"context"
	"errors"
	"fmt"

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
// finalizer), so the status patch is guarded by the current resourceVersion.
func (p *StatusPatcher) Rebase(obj Object) {
	p.before.SetResourceVersion(obj.GetResourceVersion())
	p.before.SetFinalizers(obj.GetFinalizers())
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
