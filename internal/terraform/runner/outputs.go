package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// MaxMessage bounds the message annotation: Terraform's diagnostics can be long, the first
// few KB say what went wrong.
const MaxMessage = 4096

// OutputsSecret is the run's outputs Secret, the one object the run may write (get and update,
// nothing else: it was created empty by the provisioner).
type OutputsSecret struct {
	Client          kubernetes.Interface
	Namespace, Name string
}

// Report sets the phase and message annotations; with kubeconfig set it also writes data
// kubeconfig, and with dropKubeconfig it removes it (a destroyed cluster has none). It retries
// on conflicts; the message is trimmed to MaxMessage.
func (o *OutputsSecret) Report(ctx context.Context, phase, message string, kubeconfig []byte, dropKubeconfig bool) error {
	return o.report(ctx, phase, message, kubeconfig, dropKubeconfig, nil)
}

// ReportPlan reports a plan run's end: phase succeeded, the message, and the plan's summary
// (api.AnnotationPlan, JSON).
func (o *OutputsSecret) ReportPlan(ctx context.Context, summary api.PlanSummary, message string) error {
	raw, err := json.Marshal(summary)
	if err != nil {
		return err
	}
	return o.report(ctx, string(api.StatusSucceeded), message, nil, false, map[string]string{api.AnnotationPlan: string(raw)})
}

func (o *OutputsSecret) report(ctx context.Context, phase, message string, kubeconfig []byte, dropKubeconfig bool, extra map[string]string) error {
	message = Trim(message, MaxMessage)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := o.Client.CoreV1().Secrets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		orig := s.DeepCopy()
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[api.AnnotationPhase] = phase
		s.Annotations[api.AnnotationMessage] = message
		maps.Copy(s.Annotations, extra)
		switch {
		case kubeconfig != nil:
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[api.OutputsKubeconfig] = kubeconfig
		case dropKubeconfig:
			delete(s.Data, api.OutputsKubeconfig)
		}
		if maps.Equal(orig.Annotations, s.Annotations) && maps.EqualFunc(orig.Data, s.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
			return nil
		}
		_, err = o.Client.CoreV1().Secrets(o.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to report phase %s on Secret %s/%s: %w", phase, o.Namespace, o.Name, err)
	}
	return nil
}

// Trim cuts s to at most n bytes at a rune boundary, saying it did.
func Trim(s string, n int) string {
	const more = "\n… (truncated)"
	if len(s) <= n {
		return s
	}
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
