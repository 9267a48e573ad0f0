package runner

import (
	"testing"

	"github.com/kubeopera/kubeopera/internal/terraform/render"
)

// TestRenderedOutputs: the outputs and the SSM placeholder the runner reads are the ones
// internal/terraform/render writes.
func TestRenderedOutputs(t *testing.T) {
	for _, c := range []struct{ runner, render string }{
		{OutputAdminKubeconfigParameter, render.OutputAdminKubeconfigParameter},
		{OutputClusterName, render.OutputClusterName},
		{OutputClusterEndpoint, render.OutputClusterEndpoint},
		{OutputClusterCACertificate, render.OutputClusterCACertificate},
		{SSMPendingValue, render.PendingValue},
	} {
		if c.runner != c.render {
			t.Errorf("runner reads %q, render writes %q", c.runner, c.render)
		}
	}
}
