package main

import (
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/terraform/render"
)

// renderModule renders a run's Terraform root module (vanilla_kubeadm or eks).
var renderModule jobs.RenderFunc = render.Module
