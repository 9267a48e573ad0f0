package reconcile

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Object is what the skeleton needs of a reconciled kind: conditions, observedGeneration and the
// retry record. Every kind of apis/ implements it (status_accessors.go).
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	GetObservedGeneration() int64
	SetObservedGeneration(int64)
	GetRetryStatus() *commonv1alpha1.RetryStatus
}

// PhaseObject is an Object with the seeds' phase and message. The skeleton sets the phases every
// seed state machine shares (Pending, Ready, Failed, Deleting); steps set the kind's own.
type PhaseObject interface {
	Object
	GetPhase() string
	SetPhase(string)
	SetMessage(string)
}

// The phases the skeleton sets; every kind's phase enum has them.
const (
	PhasePending  = "Pending"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
	PhaseDeleting = "Deleting"
)

func setPhase(obj Object, phase string) {
	if p, ok := obj.(PhaseObject); ok {
		p.SetPhase(phase)
	}
}

func phaseOf(obj Object) string {
	if p, ok := obj.(PhaseObject); ok {
		return p.GetPhase()
	}
	return ""
}

func setMessage(obj Object, msg string) {
	if p, ok := obj.(PhaseObject); ok {
		p.SetMessage(Truncate(msg))
	}
}
